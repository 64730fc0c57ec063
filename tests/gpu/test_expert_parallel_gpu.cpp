// parallel::ExpertParallel on CUDA tensors (label gpu, 2 ranks sharing one GPU through the
// MPI group's host staging) against one CPU process on the concatenated batch: the token
// dispatch and combine (index_select / index_add on CUDA), the experts, both all_to_all_v
// exchanges and their backward, the auxiliary losses, then reduce_expert_parallel_gradients.
// Float64: the loss and every gradient within moe_float64_bound (derived_bounds.h). Skips
// where no GPU is visible.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "distributed/dist_test_util.h"
#include "distributed/moe_test_util.h"
#include "gpu/derived_bounds.h"
#include "strata/distributed/device_mesh.h"
#include "strata/parallel/expert_parallel.h"
#include "strata/tensor/cuda.h"

namespace strata {
namespace {

using namespace test::moe;  // the shared MoE fixtures (moe_test_util.h)

struct Step {
  double loss = 0;
  std::map<std::string, Tensor> grads;  // CPU copies; absent: no gradient
  nn::MoEStats stats;
};

// One process on the CPU: every rank's batch, concatenated in rank order.
Step reference_step(const nn::MoEConfig& config, int world) {
  auto moe = build(config);
  std::vector<Tensor> xs, ys;
  for (int r = 0; r < world; ++r) {
    xs.push_back(tokens(r, 0));
    ys.push_back(targets(r, 0));
  }
  Tensor loss = loss_of(*moe, cat(xs, 0), cat(ys, 0));
  loss.backward();
  Step s{.loss = loss.item(), .grads = {}, .stats = moe->stats()};
  for (auto& [name, p] : moe->named_parameters())
    if (p.grad().defined()) s.grads[name] = p.grad().clone();
  return s;
}

// ep = world size on the GPU against one CPU process (the CPU half runs, and its premise is
// checked, without a GPU too).
void compare_with_one_process(std::optional<double> capacity) {
  auto& world = dist::world();
  const int n = world.size(), me = world.rank();
  const nn::MoEConfig config = base_config(capacity, 0.1);
  const Step ref = reference_step(config, n);
  if (capacity) {
    EXPECT_GT(ref.stats.dropped, 0) << "no slot dropped: the capacity is untested";
  }
  if (!cuda::is_available()) GTEST_SKIP() << "no GPU visible";
  const Device gpu = Device::cuda(cuda::current_device());
  dist::DeviceMesh mesh(world, {.dp = n, .ep = n});
  dist::ProcessGroup& ep_group = mesh.group(dist::MeshDim::Expert);
  auto moe = build(parallel::expert_parallel_config(config, ep_group));
  moe->to(gpu);
  ASSERT_EQ(parallel::enable_expert_parallel(*moe, ep_group), 1);
  // The tokens need a gradient, as a layer norm's output does: both exchanges run backward.
  Tensor loss = loss_of(*moe, tokens(me, 0).to(gpu).set_requires_grad(true), targets(me, 0).to(gpu));
  loss.backward();
  parallel::reduce_expert_parallel_gradients(*moe, mesh.group(dist::MeshDim::DataContext),
                                             mesh.group(dist::MeshDim::ExpertData));
  const std::string what = capacity ? "capacity 0.75" : "dropless";
  // Each rank's loss is its tokens' share: their mean is one process's loss.
  Tensor losses = full({1}, loss.item() / n, {.dtype = DType::Float64});
  world.all_reduce(losses)->wait();
  const double bound = testing::moe_float64_bound();
  EXPECT_LE(std::abs(losses.item() - ref.loss), bound * std::abs(ref.loss)) << what << ": loss";
  // Each rank counts its held experts' drops: together, one process's.
  Tensor dropped = full({1}, static_cast<double>(moe->stats().dropped), {.dtype = DType::Float64});
  world.all_reduce(dropped)->wait();
  EXPECT_EQ(static_cast<int64_t>(dropped.item()), ref.stats.dropped) << what;
  for (auto& [name, p] : moe->named_parameters()) {
    EXPECT_EQ(p.device(), gpu) << name;
    const auto it = ref.grads.find(name);
    ASSERT_EQ(p.grad().defined(), it != ref.grads.end()) << what << ": gradient presence of " << name;
    if (it == ref.grads.end()) continue;
    EXPECT_LE(testing::max_relative(p.grad().to(Device::cpu()), it->second), bound) << what << ": gradient of " << name;
  }
}

TEST(ExpertParallelGpu, DroplessGradientsMatchOneCpuProcess) { compare_with_one_process(std::nullopt); }

TEST(ExpertParallelGpu, CapacityGradientsMatchOneCpuProcess) { compare_with_one_process(0.75); }

}  // namespace
}  // namespace strata
