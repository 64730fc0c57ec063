// nn::Mixtral under DistributedDataParallel equals one process on the global batch (float64).
// Dropless routing and a z-loss (a mean over tokens, so the ranks' mean of their means is the
// global one); the load-balancing loss is left out: a product of two batch means, it is not
// that average. Every expert gets a gradient on every rank (zeros when idle), so DDP's buckets
// fill alike whatever the routing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "distributed/dist_test_util.h"
#include "distributed/model_equivalence_util.h"
#include "strata/distributed/init.h"
#include "strata/nn/mixtral.h"
#include "strata/optim/adam.h"
#include "strata/parallel/ddp.h"

namespace strata {
namespace {

nn::MixtralConfig config() {
  nn::MixtralConfig c;
  c.llama = {.vocab_size = kVocab,
             .context = kSeq,
             .n_layer = 2,
             .n_head = 4,
             .n_kv_head = 2,
             .n_embd = 16,
             .intermediate_size = 12,
             .dtype = DType::Float64};
  c.num_experts = 4;
  c.top_k = 2;
  c.z_loss_coef = 0.01;
  return c;
}

void train(nn::Mixtral& model, int rank, int ranks, int64_t rows_per_rank) {
  optim::AdamW opt(model.parameters(), adamw());
  for (int s = 0; s < kSteps; ++s) {
    auto [tokens, targets] = batch(s, ranks * rows_per_rank);
    model
        .loss(tokens.narrow(0, rank * rows_per_rank, rows_per_rank),
              targets.narrow(0, rank * rows_per_rank, rows_per_rank))
        .backward();
    opt.step();
    opt.zero_grad();
  }
}

TEST(DDPMixtral, EqualsOneProcessInFloat64) {
  auto& world = dist::world();
  const int n = world.size();
  constexpr int64_t kRows = 2;
  nn::Mixtral model(config());
  parallel::DistributedDataParallel ddp(model, world);
  train(model, world.rank(), n, kRows);
  nn::Mixtral reference(config());
  train(reference, 0, 1, n * kRows);
  std::map<std::string, Tensor> ref;
  for (const auto& [name, p] : reference.named_parameters()) ref[name] = p;
  double worst = 0;
  for (const auto& [name, p] : model.named_parameters()) {
    const std::vector<double> a = p.to_vector<double>(), b = ref.at(name).to_vector<double>();
    double diff = 0, scale = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      diff = std::max(diff, std::fabs(a[i] - b[i]));
      scale = std::max(scale, std::fabs(b[i]));
    }
    worst = std::max(worst, diff / scale);
  }
  // Float64: only the order of the gradient sums differs (AdamW's steps of 1e-3 from values of
  // 0.02): relative differences of a few hundred ulps at most.
  EXPECT_LE(worst, 1e-12) << "N=" << n;
}

}  // namespace
}  // namespace strata
