// Mixtral with its experts split over the tensor-parallel group (w1, w3 column-parallel, w2
// row-parallel, the router whole) trains as one process on the same global batch: float64,
// 5 AdamW steps (clipped), every parameter within 1e-12 relative of one process's. On 2
// ranks tp = 2, with and without sequence parallelism; on 4 ranks tp = 2 x ep = 2 over two
// data ranks (global load balancing) under ZeRO-1, and sequence parallel under ZeRO-2. The router leaves experts idle
// (their rows 0 on every tensor rank alike), so the per-forward collectives must not depend on which experts ran: the
// test also counts them.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>

#include "distributed/dist_test_util.h"
#include "distributed/model_equivalence_util.h"
#include "strata/nn/mixtral.h"
#include "strata/parallel/tp_factory.h"
#include "strata/strata.h"

namespace strata {
namespace {

constexpr double kClip = 0.5;  // below the first steps' norms: clipping changes them

nn::MixtralConfig mixtral_config(int64_t ep_degree = 1, int64_t ep_rank = 0) {
  return {.llama = llama_config(DType::Float64),
          .num_experts = 8,  // 2 of 8 per token over 16 tokens a rank: some idle at every step
          .top_k = 2,
          .aux_loss_coef = 0.01,
          .z_loss_coef = 0.001,
          .expert_parallel_degree = ep_degree,
          .expert_parallel_rank = ep_rank};
}

struct MixtralReference {
  std::map<std::string, Tensor> params;
  bool idle_expert = false;  // some expert had no rows at some step
};

// One process on the global batch of `rows` rows per step.
MixtralReference train_one_process(int64_t rows) {
  nn::Mixtral model(mixtral_config());
  optim::AdamW opt(model.parameters(), adamw());
  MixtralReference ref;
  for (int s = 0; s < kSteps; ++s) {
    auto [x, y] = batch(s, rows);
    opt.zero_grad();
    model.loss(x, y).backward();
    for (const nn::MoEStats& st : model.moe_stats())
      ref.idle_expert = ref.idle_expert || std::count(st.kept_per_expert.begin(), st.kept_per_expert.end(), 0) > 0;
    optim::clip_grad_norm(model.parameters(), kClip);
    opt.step();
  }
  for (auto& [name, p] : model.named_parameters()) ref.params.emplace(name, p.clone());
  return ref;
}

double relative_difference(const Tensor& got, const Tensor& want) {
  double diff = 0, scale = 0;
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  for (size_t i = 0; i < w.size(); ++i) {
    diff = std::max(diff, std::fabs(g[i] - w[i]));
    scale = std::max(scale, std::fabs(w[i]));
  }
  return diff / scale;
}

// Every parameter this rank holds, its tensor-parallel parts gathered over `tp`, against
// one process's (collective over tp: its ranks hold the same names).
void expect_like_one_process(nn::Module& model, dist::ProcessGroup& tp, const MixtralReference& ref,
                             const std::string& what) {
  const auto layouts = parallel::shard_layouts_of(model);
  int split_experts = 0;
  for (auto& [name, p] : model.named_parameters()) {
    const auto it = layouts.find(name);
    split_experts += it != layouts.end() && parallel::is_expert_parameter(name) ? 1 : 0;
    const Tensor full = it == layouts.end() ? p : parallel::unshard(p, it->second, tp);
    ASSERT_TRUE(ref.params.count(name)) << what << ": " << name;
    ASSERT_EQ(full.shape(), ref.params.at(name).shape()) << what << ": " << name;
    EXPECT_LE(relative_difference(full, ref.params.at(name)), 1e-12) << what << ": " << name;
  }
  EXPECT_GT(split_experts, 0) << what << ": the experts' weights are split";
}

int64_t all_reduces(const dist::CommStats& s) {
  auto it = s.find(dist::OpType::AllReduce);
  return it == s.end() ? 0 : static_cast<int64_t>(it->second.calls);
}

}  // namespace

TEST(TensorParallelMixtral, TensorParallelTrainsLikeOneProcess) {
  auto& world = dist::world();
  if (world.size() != 2) GTEST_SKIP() << "tp = 2 on 2 ranks";
  const int64_t rows = 2;
  const MixtralReference ref = train_one_process(rows);
  EXPECT_TRUE(ref.idle_expert) << "the batch must leave some expert idle";
  for (bool sequence_parallel : {false, true}) {
    const std::string what = sequence_parallel ? "tp=2 sequence-parallel" : "tp=2";
    auto tp =
        std::make_shared<parallel::TensorParallelFactory>(world, parallel::TensorParallelOptions{sequence_parallel});
    nn::Mixtral model(mixtral_config(), tp);
    optim::AdamW opt(model.parameters(), adamw());
    for (int s = 0; s < kSteps; ++s) {
      auto [x, y] = batch(s, rows);
      opt.zero_grad();
      world.reset_stats();
      Tensor loss = model.loss(x, y);
      // Per block: attention's, and the experts' one sum whatever their rows; the embedding's;
      // the loss's three (row max, sum of exponentials, target logit).
      if (!sequence_parallel) {
        EXPECT_EQ(all_reduces(world.stats()), 2 * kLayers + 1 + 3) << "step " << s;
      }
      world.reset_stats();
      loss.backward();
      // Per block: attention's region and the experts' input; the head's input.
      if (!sequence_parallel) {
        EXPECT_EQ(all_reduces(world.stats()), 2 * kLayers + 1) << "step " << s;
      }
      parallel::tp_clip_grad_norm(model, kClip, world);
      opt.step();
    }
    expect_like_one_process(model, world, ref, what);
  }
}

// 4 ranks: tp = 2 inside, the experts sharded over ep = 2 data ranks (MeshDim::Expert: the
// ranks with the same tensor coordinate), each data rank half the batch.
TEST(TensorParallelMixtral, TensorByExpertParallelTrainsLikeOneProcess) {
  auto& world = dist::world();
  if (world.size() != 4) GTEST_SKIP() << "tp = 2 x ep = 2 on 4 ranks";
  dist::DeviceMesh mesh(world, {.dp = 2, .tp = 2, .ep = 2});
  auto& data = mesh.group(dist::MeshDim::DataContext);
  auto& tpg = mesh.group(dist::MeshDim::Tensor);
  auto& ep = mesh.group(dist::MeshDim::Expert);
  const int64_t rows = 4, local_rows = 2;
  const MixtralReference ref = train_one_process(rows);
  for (bool sequence_parallel : {false, true}) {
    // ZeRO-1 without sequence parallelism, ZeRO-2 with it.
    const int stage = sequence_parallel ? 2 : 1;
    auto tp =
        std::make_shared<parallel::TensorParallelFactory>(tpg, parallel::TensorParallelOptions{sequence_parallel});
    nn::Mixtral model(mixtral_config(ep.size(), ep.rank()), tp);
    ASSERT_EQ(parallel::enable_expert_parallel(model, ep), kLayers);
    ASSERT_EQ(parallel::enable_global_load_balancing(model, data), kLayers);
    parallel::ZeroOptimizer opt(
        model, adamw(), data,
        parallel::ZeroOptions{
            .stage = stage,
            .tensor_parallel = {.group = &tpg, .is_split = parallel::split_parameter_predicate(model)},
            .experts = {.data = &mesh.group(dist::MeshDim::ExpertData)}});
    for (int s = 0; s < kSteps; ++s) {
      auto [x, y] = batch(s, rows);
      opt.zero_grad();
      model
          .loss(x.narrow(0, local_rows * data.rank(), local_rows).contiguous(),
                y.narrow(0, local_rows * data.rank(), local_rows).contiguous())
          .backward();
      opt.clip_grad_norm(kClip);
      opt.step();
    }
    expect_like_one_process(
        model, tpg, ref,
        std::string("tp=2 x ep=2 zero-") + std::to_string(stage) + (sequence_parallel ? " sequence-parallel" : ""));
  }
}

}  // namespace strata
