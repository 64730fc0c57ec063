// Global-batch load balancing (parallel::enable_global_load_balancing) against one process on
// the ranks' batches concatenated: the MoE of moe_test_util.h with a load-balancing loss and a
// z-loss, 5 AdamW steps. Float64: the parameters agree to 1e-12 relative (only the summation
// order of the gradient averages differs) and, at every step, the mean of the ranks' losses is
// one process's loss to 1e-12 relative; at pure data parallelism (dp = world, by
// reduce_expert_parallel_gradients and by DDP; dp 2 x cp 2 on 4 ranks), at EP = world
// (dropless and capacity 1.0) and at EP 2 of 4. Without the reducer the ranks' per-rank
// loss is not one process's, so these tests can fail.
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "distributed/dist_test_util.h"
#include "distributed/moe_test_util.h"
#include "strata/distributed/device_mesh.h"
#include "strata/nn/moe.h"
#include "strata/ops.h"
#include "strata/optim/adam.h"
#include "strata/parallel/ddp.h"
#include "strata/parallel/expert_parallel.h"
#include "strata/parallel/moe_load_balance.h"
#include "strata/tensor/factory.h"

namespace strata {
namespace {

using namespace test::moe;  // the shared MoE fixtures (moe_test_util.h)

constexpr double kAuxLossCoef = 0.1;
constexpr double kFloat64Bound = 1e-12;

struct Layout {
  int dp = 1;
  int cp = 1;
  int ep = 1;
  bool ddp = false;  // gradients averaged by DistributedDataParallel (ep 1 only)
};

struct DistributedRun {
  std::map<std::string, Tensor> params;
  std::vector<double> mean_losses;  // per step: the mean over the ranks of each rank's loss
};

// Mean over `group` of each rank's `value`.
double mean_over(dist::ProcessGroup& group, double value) {
  Tensor t = from_vector(std::vector<double>{value}, {1});
  group.all_reduce(t)->wait();
  return t.item() / static_cast<double>(group.size());
}

// One step's balance counts: with the reducer, one process's counts over the whole batch;
// tokens_per_expert stays this rank's own routing.
void check_balance_counts(const nn::MoEStats& mine, const nn::MoEStats& one, int ranks, bool global, int64_t t) {
  int64_t own = 0;
  for (int64_t n : mine.tokens_per_expert) own += n;
  EXPECT_EQ(own, kTokens * kTopK) << "step " << t << ": tokens_per_expert must stay this rank's routing";
  if (global) {
    EXPECT_EQ(mine.balance_tokens_per_expert, one.tokens_per_expert) << "step " << t;
    EXPECT_EQ(mine.balance_tokens, ranks * kTokens) << "step " << t;
  } else {
    EXPECT_EQ(mine.balance_tokens_per_expert, mine.tokens_per_expert) << "step " << t;
    EXPECT_EQ(mine.balance_tokens, kTokens) << "step " << t;
  }
}

// The MoE on this rank's batch (its DataContext coordinate = its place in the global batch),
// 5 AdamW steps, the gradients averaged over DataContext (expert gradients summed over
// ExpertData, reduce_expert_parallel_gradients; or DDP), global balancing when `global`.
DistributedRun train_distributed(const Layout& layout, std::optional<double> capacity, bool global,
                                 const Reference& ref) {
  auto& world = dist::world();
  dist::DeviceMesh mesh(world, {.dp = layout.dp, .cp = layout.cp, .ep = layout.ep});
  dist::ProcessGroup& data = mesh.group(dist::MeshDim::DataContext);
  nn::MoEConfig config = base_config(capacity, kAuxLossCoef);
  if (layout.ep > 1) config = parallel::expert_parallel_config(config, mesh.group(dist::MeshDim::Expert));
  auto moe = build(config);
  if (layout.ep > 1) {
    EXPECT_EQ(parallel::enable_expert_parallel(*moe, mesh.group(dist::MeshDim::Expert)), 1);
  }
  if (global) {
    EXPECT_EQ(parallel::enable_global_load_balancing(*moe, data), 1);
  }
  std::unique_ptr<parallel::DistributedDataParallel> ddp;
  if (layout.ddp)
    ddp = std::make_unique<parallel::DistributedDataParallel>(*moe, data,
                                                              parallel::DDPOptions{.find_unused_parameters = true});
  std::vector<Tensor> params;
  for (auto& [name, p] : moe->named_parameters()) params.push_back(p);
  optim::AdamW opt(params, {.lr = 0.01});
  const int me = mesh.coord(dist::MeshDim::DataContext);
  DistributedRun run;
  for (int64_t t = 0; t < kSteps; ++t) {
    opt.zero_grad();
    // The tokens need a gradient, as a layer norm's output does (expert parallelism's
    // exchanges then run backward on every rank).
    Tensor loss = loss_of(*moe, tokens(me, t).set_requires_grad(true), targets(me, t));
    run.mean_losses.push_back(mean_over(data, loss.item()));
    check_balance_counts(moe->stats(), ref.stats[static_cast<size_t>(t)], data.size(), global, t);
    loss.backward();
    if (!ddp) parallel::reduce_expert_parallel_gradients(*moe, data, mesh.group(dist::MeshDim::ExpertData));
    opt.step();
  }
  for (auto& [name, p] : moe->named_parameters()) run.params[name] = p.detach().clone();
  return run;
}

double relative(double a, double b) { return std::abs(a - b) / std::abs(b); }

// Global balancing equals one process: every step's mean loss and the final parameters.
void expect_one_process(const Layout& layout, std::optional<double> capacity) {
  const Reference ref = train_reference(base_config(capacity, kAuxLossCoef), dist::world().size());
  const DistributedRun run = train_distributed(layout, capacity, /*global=*/true, ref);
  for (size_t t = 0; t < run.mean_losses.size(); ++t)
    EXPECT_LE(relative(run.mean_losses[t], ref.losses[t]), kFloat64Bound)
        << "step " << t << ": mean of the ranks' losses " << run.mean_losses[t] << ", one process " << ref.losses[t];
  for (const auto& [name, p] : run.params) {
    if (!ref.params.count(name)) continue;  // (expert parallelism: the held experts only)
    EXPECT_LE(relative_difference(p, ref.params.at(name)), kFloat64Bound)
        << name << " at dp " << layout.dp << " cp " << layout.cp << " ep " << layout.ep;
  }
}

TEST(DistMoELoadBalance, DataParallelEqualsOneProcess) {
  expect_one_process({.dp = dist::world().size()}, std::nullopt);
}

TEST(DistMoELoadBalance, DataParallelUnderDDPEqualsOneProcess) {
  expect_one_process({.dp = dist::world().size(), .ddp = true}, std::nullopt);
}

TEST(DistMoELoadBalance, DataTimesContextGroupEqualsOneProcess) {
  if (dist::world().size() != 4) GTEST_SKIP() << "needs 4 ranks";
  expect_one_process({.dp = 2, .cp = 2}, std::nullopt);
}

TEST(DistMoELoadBalance, ExpertParallelEqualsOneProcess) {
  const int n = dist::world().size();
  expect_one_process({.dp = n, .ep = n}, std::nullopt);
}

TEST(DistMoELoadBalance, ExpertParallelWithCapacityEqualsOneProcess) {
  const int n = dist::world().size();
  expect_one_process({.dp = n, .ep = n}, 1.0);
}

TEST(DistMoELoadBalance, ExpertParallelTwoOfFourEqualsOneProcess) {
  if (dist::world().size() != 4) GTEST_SKIP() << "needs 4 ranks";
  expect_one_process({.dp = 4, .ep = 2}, std::nullopt);
}

// Without the reducer each rank's f_e is its own routing: the mean of the ranks' losses is
// not one process's loss (already at step 0, with equal parameters), and training drifts
// away from it - by far more than the bound the tests above hold.
TEST(DistMoELoadBalance, PerRankBalancingDiffersFromOneProcess) {
  const int n = dist::world().size();
  const Reference ref = train_reference(base_config(std::nullopt, kAuxLossCoef), n);
  const DistributedRun run = train_distributed({.dp = n}, std::nullopt, /*global=*/false, ref);
  EXPECT_GT(relative(run.mean_losses[0], ref.losses[0]), 1e3 * kFloat64Bound)
      << "the ranks route alike: per-rank balancing would equal one process and the tests above prove nothing";
  double worst = 0.0;
  for (const auto& [name, p] : run.params) worst = std::max(worst, relative_difference(p, ref.params.at(name)));
  EXPECT_GT(worst, 1e3 * kFloat64Bound);
}

}  // namespace
}  // namespace strata
