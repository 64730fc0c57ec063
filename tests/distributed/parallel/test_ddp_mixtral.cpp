// nn::Mixtral under DistributedDataParallel and ZeRO-3 equals one process on the global batch
// (float64).
// Dropless routing and a z-loss (a mean over tokens, so the ranks' mean of their means is the
// global one); the load-balancing loss, a product of two batch means, is not that average
// unless its routing counts are summed over the ranks (parallel::enable_global_load_balancing,
// the last test). Eight experts, two per token, one row of kSeq tokens per rank: some experts
// are idle on a rank at some step (checked), get no gradient there and are reduced as zero
// (find_unused_parameters; ZeRO needs no option), as one process on the global batch
// computes them.
#include <gtest/gtest.h>

#include "distributed/dist_test_util.h"
#include "distributed/model_equivalence_util.h"
#include "strata/distributed/init.h"
#include "strata/nn/mixtral.h"
#include "strata/optim/adam.h"
#include "strata/parallel/context_parallel.h"
#include "strata/parallel/ddp.h"
#include "strata/parallel/moe_load_balance.h"
#include "strata/parallel/zero.h"

namespace strata {
namespace {

nn::MixtralConfig config(double aux_loss_coef = 0.0) {
  nn::MixtralConfig c;
  c.llama = {.vocab_size = kVocab,
             .context = kSeq,
             .n_layer = 2,
             .n_head = 4,
             .n_kv_head = 2,
             .n_embd = 16,
             .intermediate_size = 12,
             .dtype = DType::Float64};
  c.num_experts = 8;
  c.top_k = 2;
  c.z_loss_coef = 0.01;
  c.aux_loss_coef = aux_loss_coef;
  return c;
}

// Trains this rank's rows of each global batch; returns how many (step, layer, expert) had
// no token on this rank.
int64_t train(nn::Mixtral& model, optim::Optimizer& opt, int rank, int ranks, int64_t rows_per_rank) {
  int64_t idle = 0;
  for (int s = 0; s < kSteps; ++s) {
    auto [tokens, targets] = batch(s, ranks * rows_per_rank);
    model
        .loss(tokens.narrow(0, rank * rows_per_rank, rows_per_rank),
              targets.narrow(0, rank * rows_per_rank, rows_per_rank))
        .backward();
    for (const nn::MoEStats& st : model.moe_stats())
      for (int64_t n : st.tokens_per_expert) idle += n == 0 ? 1 : 0;
    opt.step();
    opt.zero_grad();
  }
  return idle;
}

// One process on the whole global batch of `rows` rows.
Reference one_process(int64_t rows, double aux_loss_coef = 0.0) {
  nn::Mixtral reference(config(aux_loss_coef));
  optim::AdamW opt(reference.parameters(), adamw());
  train(reference, opt, 0, 1, rows);
  return {.weights = reference.state_dict()};
}

TEST(DDPMixtral, EqualsOneProcessInFloat64) {
  auto& world = dist::world();
  const int n = world.size();
  constexpr int64_t kRows = 1;
  nn::Mixtral model(config());
  parallel::DistributedDataParallel ddp(model, world, {.find_unused_parameters = true});
  optim::AdamW opt(model.parameters(), adamw());
  const int64_t idle = train(model, opt, world.rank(), n, kRows);
  EXPECT_GT(idle, 0) << "no expert was idle on rank " << world.rank() << ": the test covers less than it says";
  std::string where;
  const double worst = worst_difference(model.state_dict(), one_process(n * kRows), DType::Float64, where);
  EXPECT_LE(worst, tolerance(DType::Float64)) << "N=" << n << " at " << where;
}

// ZeRO-3 with each decoder layer a unit (the family's zero3_unit): idle experts' shards get
// no gradient and no step, as in one process.
TEST(DDPMixtral, ZeroStage3EqualsOneProcessInFloat64) {
  auto& world = dist::world();
  const int n = world.size();
  constexpr int64_t kRows = 1;
  nn::Mixtral model(config());
  parallel::ZeroOptimizer zero(model, adamw(), world, {.stage = 3});
  train(model, zero, world.rank(), n, kRows);
  std::string where;
  const double worst = worst_difference(zero.full_parameters(), one_process(n * kRows), DType::Float64, where);
  EXPECT_LE(worst, tolerance(DType::Float64)) << "N=" << n << " at " << where;
}

// With the load-balancing loss: its routing counts summed over the ranks, DDP equals one
// process on the global batch, also with activation recompute (the counts reduced again when
// backward reruns each block); left per rank, it does not (so the first check can fail).
TEST(DDPMixtral, GlobalLoadBalancingEqualsOneProcessInFloat64) {
  auto& world = dist::world();
  const int n = world.size();
  constexpr int64_t kRows = 1;
  constexpr double kAuxLossCoef = 0.02;
  const Reference one = one_process(n * kRows, kAuxLossCoef);
  struct Variant {
    bool global, recompute;
  };
  double per_rank = 0.0;
  for (const Variant v : {Variant{false, false}, Variant{true, false}, Variant{true, true}}) {
    nn::Mixtral model(config(kAuxLossCoef));
    model.set_recompute(v.recompute);
    if (v.global) {
      EXPECT_EQ(parallel::enable_global_load_balancing(model, world), config().llama.n_layer);
    }
    parallel::DistributedDataParallel ddp(model, world, {.find_unused_parameters = true});
    optim::AdamW opt(model.parameters(), adamw());
    train(model, opt, world.rank(), n, kRows);
    std::string where;
    const double worst = worst_difference(model.state_dict(), one, DType::Float64, where);
    if (v.global) {
      EXPECT_LE(worst, tolerance(DType::Float64)) << "N=" << n << " recompute " << v.recompute << " at " << where;
    } else {
      per_rank = worst;
    }
  }
  EXPECT_GT(per_rank, 1e3 * tolerance(DType::Float64))
      << "per-rank balancing matched one process: the ranks route alike";
}

// Context parallelism: one sequence split over the ranks (attention across the chunks, the
// language-model loss a mean over every rank's targets), the routing counts summed over
// them, DDP averaging the gradients: one process on the whole sequence.
TEST(DDPMixtral, ContextParallelWithGlobalLoadBalancingEqualsOneProcessInFloat64) {
  auto& world = dist::world();
  constexpr double kAuxLossCoef = 0.02;
  nn::Mixtral model(config(kAuxLossCoef));
  auto cp = std::make_shared<parallel::ContextParallel>(world);
  model.set_context_split(cp);
  EXPECT_EQ(parallel::enable_global_load_balancing(model, world), config().llama.n_layer);
  parallel::DistributedDataParallel ddp(model, world, {.find_unused_parameters = true});
  optim::AdamW opt(model.parameters(), adamw());
  for (int s = 0; s < kSteps; ++s) {
    auto [tokens, targets] = batch(s, 1);
    model.loss(cp->local(tokens, 1).contiguous(), cp->local(targets, 1).contiguous()).backward();
    opt.step();
    opt.zero_grad();
  }
  std::string where;
  const double worst = worst_difference(model.state_dict(), one_process(1, kAuxLossCoef), DType::Float64, where);
  EXPECT_LE(worst, tolerance(DType::Float64)) << "cp=" << world.size() << " at " << where;
}

}  // namespace
}  // namespace strata
