// DDP with the model on a GPU (label gpu, 2 ranks): each rank trains on its half of the
// global batch with its model on CUDA; the result must equal one CPU process trained on the
// whole batch (float64, AdamW, 3 steps, GPT and Llama), so buckets, hooks, averaging and the
// reduction all work on device memory. Over the MPI world (both ranks may share one GPU:
// the group stages CUDA tensors through the host) and, where each rank has its own GPU,
// over an NCCL group.
#include <gtest/gtest.h>

#include "distributed/ddp_test_util.h"
#include "strata/tensor/cuda.h"

namespace strata::test {
namespace {

constexpr int64_t kPerRank = 2;
constexpr int kSteps = 3;

void train_ddp_on_gpu(nn::CausalLM& model, dist::ProcessGroup& group, int64_t global) {
  model.to(Device::cuda(cuda::current_device()));
  DistributedDataParallel ddp(model, group, {.bucket_cap_bytes = 4096, .first_bucket_cap_bytes = 2048});
  optim::AdamW opt(model.parameters(), adamw());
  const Device gpu = Device::cuda(cuda::current_device());
  for (int step = 0; step < kSteps; ++step) {
    const Batch b = rank_slice(global_batch(step, global, model), group.rank(), kPerRank);
    opt.zero_grad();
    model.loss(b.inputs.to(gpu), b.targets.to(gpu)).backward();
    opt.step();
  }
}

void train_one_process(nn::CausalLM& model, int64_t global) {
  optim::AdamW opt(model.parameters(), adamw());
  for (int step = 0; step < kSteps; ++step) {
    const Batch b = global_batch(step, global, model);
    opt.zero_grad();
    model.loss(b.inputs, b.targets).backward();
    opt.step();
  }
}

void expect_equivalent(dist::ProcessGroup& group) {
  for (Family family : {Family::GPT, Family::Llama}) {
    const int64_t global = kPerRank * group.size();
    auto on_gpu = tiny_model(family, DType::Float64);
    auto reference = tiny_model(family, DType::Float64);
    train_ddp_on_gpu(*on_gpu, group, global);
    train_one_process(*reference, global);
    EXPECT_LT(max_relative_difference(*on_gpu, *reference), 1e-11)
        << (family == Family::GPT ? "GPT" : "Llama") << " over group '" << group.name() << "'";
  }
}

TEST(DdpGpu, MpiGroupMatchesOneProcess) {
  if (!cuda::is_available()) GTEST_SKIP() << "no GPU visible";
  expect_equivalent(dist::world());
}

TEST(DdpGpu, NcclGroupMatchesOneProcess) {
  if (!dist::nccl_is_built()) GTEST_SKIP() << "strata was built without NCCL";
  if (!cuda::is_available()) GTEST_SKIP() << "no GPU visible";
  if (cuda::device_count() < dist::world().size()) GTEST_SKIP() << "NCCL needs one GPU per rank";
  auto nccl = dist::new_nccl_group(dist::world());
  expect_equivalent(*nccl);
}

}  // namespace
}  // namespace strata::test
