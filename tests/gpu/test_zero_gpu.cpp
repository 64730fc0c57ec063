// ZeRO stages 1-3 with the model on a GPU (label gpu, 2 ranks over the MPI world, which
// stages CUDA tensors through the host so both ranks may share one GPU): buckets, shards,
// master weights, gradient clipping and AdamW on device memory must train the tiny GPT and
// Llama as one CPU process does on the global batch (float64, float64 masters).
#include <gtest/gtest.h>

#include "distributed/zero_test_util.h"
#include "strata/tensor/cuda.h"

namespace strata::test {
namespace {

ZeroRun train_zero_on_gpu(Family family, int stage, const InnerOptimizer& inner, double clip) {
  auto& world = dist::world();
  const Device gpu = Device::cuda(cuda::current_device());
  auto model = tiny_model(family, DType::Float64);
  model->to(gpu);
  ZeroOptions options = zero_options(stage);
  options.master_dtype = DType::Float64;
  ZeroOptimizer zero(*model, inner, world, options);
  ZeroRun run;
  for (int s = 0; s < kZeroSteps; ++s) {
    Batch mine = rank_slice(global_batch(s, world.size() * kZeroPerRank, *model), world.rank(), kZeroPerRank);
    model->loss(mine.inputs.to(gpu), mine.targets.to(gpu)).backward();
    run.norms.push_back(zero.clip_grad_norm(clip));
    zero.step();
    zero.zero_grad();
  }
  for (auto& [name, t] : zero.full_parameters()) run.params[name] = t.to(Device::cpu());
  return run;
}

TEST(ZeroGpu, EveryStageMatchesOneProcess) {
  if (!cuda::is_available()) GTEST_SKIP() << "no GPU visible";
  const InnerOptimizer inner = optim::AdamWOptions{.lr = 1e-2, .weight_decay = 0.1};
  for (Family family : {Family::GPT, Family::Llama}) {
    const ZeroRun want = train_one_process(family, DType::Float64, inner, 0.5);
    for (int stage : {1, 2, 3}) {
      const ZeroRun got = train_zero_on_gpu(family, stage, inner, 0.5);
      EXPECT_LT(max_relative_difference(got.params, want.params), 1e-10)
          << (family == Family::GPT ? "GPT" : "Llama") << " stage " << stage;
      ASSERT_EQ(got.norms.size(), want.norms.size());
      for (size_t k = 0; k < want.norms.size(); ++k) EXPECT_NEAR(got.norms[k], want.norms[k], 1e-10 * want.norms[k]);
    }
  }
}

}  // namespace
}  // namespace strata::test
