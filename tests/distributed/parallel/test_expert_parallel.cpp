// Expert parallelism (parallel::ExpertParallel) against one process on the same global batch:
// an nn::MoE with 8 experts, top-2, a router biased so that each rank's tokens prefer a few
// experts (others idle on that rank, some idle on the whole batch at some steps), trained 5
// AdamW steps at ep = world size (dropless and with a capacity, the drops counted as one
// process over the concatenated batch) and at ep = 2 on 4 ranks (expert-data groups of 2).
// Float64: the parameters agree to 1e-12 relative (only the summation order of a few
// gradient sums differs). Also the all_to_all_v bytes of a step, from the routing counts.
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "distributed/dist_test_util.h"
#include "distributed/moe_test_util.h"
#include "float32_bound.h"
#include "strata/autograd/grad_mode.h"
#include "strata/distributed/device_mesh.h"
#include "strata/nn/moe.h"
#include "strata/ops.h"
#include "strata/optim/adam.h"
#include "strata/optim/grad_clip.h"
#include "strata/parallel/ddp.h"
#include "strata/parallel/expert_parallel.h"
#include "strata/parallel/zero.h"

namespace strata {
namespace {

using namespace test::moe;  // the shared MoE fixtures (moe_test_util.h)

int64_t sum_of(const std::vector<int64_t>& v) {
  int64_t s = 0;
  for (int64_t x : v) s += x;
  return s;
}

// How the ranks reduce the gradients: reduce_expert_parallel_gradients and a plain AdamW, or
// a ZeroOptimizer at `zero_stage` with the experts' group beside it (clipping to `clip`).
// Or DistributedDataParallel with the experts' group beside it, and a plain AdamW.
struct Reduction {
  std::optional<int> zero_stage = std::nullopt;
  std::optional<double> clip = std::nullopt;
  bool ddp = false;
};

// The optimizer of one expert-parallel run, per Reduction.
struct RankOptimizer {
  std::unique_ptr<parallel::DistributedDataParallel> ddp;
  std::unique_ptr<optim::Optimizer> plain;
  std::unique_ptr<parallel::ZeroOptimizer> zero;
  optim::Optimizer& get() { return zero ? static_cast<optim::Optimizer&>(*zero) : *plain; }
};

RankOptimizer make_optimizer(nn::MoE& moe, dist::DeviceMesh& mesh, const Reduction& how) {
  RankOptimizer out;
  if (how.zero_stage) {
    out.zero = std::make_unique<parallel::ZeroOptimizer>(
        moe, optim::AdamWOptions{.lr = 0.01}, mesh.group(dist::MeshDim::DataContext),
        parallel::ZeroOptions{.stage = *how.zero_stage, .experts = {.data = &mesh.group(dist::MeshDim::ExpertData)}});
    return out;
  }
  if (how.ddp)
    out.ddp = std::make_unique<parallel::DistributedDataParallel>(
        moe, mesh.group(dist::MeshDim::DataContext),
        parallel::DDPOptions{.experts = {.data = &mesh.group(dist::MeshDim::ExpertData)}});
  std::vector<Tensor> params;
  for (auto& [name, p] : moe.named_parameters()) params.push_back(p);
  out.plain = std::make_unique<optim::AdamW>(params, optim::AdamWOptions{.lr = 0.01});
  return out;
}

// After backward: the gradients reduced (and clipped: the norm checked against one process's).
void reduce_and_clip(nn::MoE& moe, dist::DeviceMesh& mesh, RankOptimizer& opt, const Reduction& how,
                     double reference_norm, double bound) {
  if (how.ddp) return;  // reduced during backward
  if (!how.zero_stage) {
    parallel::reduce_expert_parallel_gradients(moe, mesh.group(dist::MeshDim::DataContext),
                                               mesh.group(dist::MeshDim::ExpertData));
    return;
  }
  if (!how.clip) return;
  EXPECT_GT(reference_norm, *how.clip) << "the clipping must change this step";
  const double norm = opt.zero->clip_grad_norm(*how.clip);
  EXPECT_LE(std::abs(norm - reference_norm), bound * reference_norm) << "gradient norm";
}

// ep ranks of the mesh's data ranks: the MoE sharded over them, 5 AdamW steps, each step's
// stats and all_to_all_v bytes checked against the reference's routing.
// dtype float32: within `bound` (derived from one process's own float32 error).
void train_and_compare(int ep, std::optional<double> capacity_factor, DType dtype = DType::Float64,
                       double bound = 1e-12, const Reduction& how = {}) {
  auto& world = dist::world();
  const int n = world.size(), me = world.rank();
  const Reference ref = train_reference(base_config(capacity_factor), n, dtype, how.clip);
  dist::DeviceMesh mesh(world, {.dp = n, .ep = ep});
  dist::ProcessGroup& ep_group = mesh.group(dist::MeshDim::Expert);
  auto moe = build(parallel::expert_parallel_config(base_config(capacity_factor), ep_group), dtype);
  ASSERT_EQ(parallel::enable_expert_parallel(*moe, ep_group), 1);
  RankOptimizer opt = make_optimizer(*moe, mesh, how);
  const int64_t held = kExperts / ep, first = ep_group.rank() * held, group_first_rank = me - ep_group.rank();
  for (int64_t t = 0; t < kSteps; ++t) {
    opt.get().zero_grad();
    ep_group.reset_stats();
    // The tokens need a gradient, as a layer norm's output does: both exchanges run backward.
    loss_of(*moe, tokens(me, t).to(dtype).set_requires_grad(true), targets(me, t).to(dtype)).backward();
    // Rows this rank receives: the group's slots routed to its experts, from the reference.
    const std::vector<int64_t>& routed = ref.routed[static_cast<size_t>(t)];
    int64_t received = 0;
    for (int64_t s = group_first_rank * kTokens * kTopK; s < (group_first_rank + ep) * kTokens * kTopK; ++s)
      received += routed[static_cast<size_t>(s)] >= first && routed[static_cast<size_t>(s)] < first + held ? 1 : 0;
    const auto counts_bytes = static_cast<uint64_t>(ep * (held * kTopK + 1) * 8);
    const auto row_bytes = static_cast<uint64_t>(kHidden) * dtype_size(dtype);
    const auto sent = static_cast<uint64_t>(kTokens * kTopK);
    const dist::OpCounter a2a = ep_group.stats().at(dist::OpType::AllToAllV);
    EXPECT_EQ(a2a.calls, 5u) << "counts, dispatch, combine, and the two exchanges' backward";
    EXPECT_EQ(a2a.bytes, counts_bytes + 2 * (sent + static_cast<uint64_t>(received)) * row_bytes) << "step " << t;
    EXPECT_EQ(a2a.received_bytes, a2a.bytes) << "step " << t;
    if (ep == n) {  // the whole batch is one ep group: kept and dropped sum to one process's
      const nn::MoEStats& one = ref.stats[static_cast<size_t>(t)];
      Tensor sums = from_vector(std::vector<double>{static_cast<double>(moe->stats().dropped),
                                                    static_cast<double>(sum_of(moe->stats().kept_per_expert))},
                                {2});
      ep_group.all_reduce(sums)->wait();
      EXPECT_EQ(sums.to_vector<double>(), (std::vector<double>{static_cast<double>(one.dropped),
                                                               static_cast<double>(sum_of(one.kept_per_expert))}))
          << "step " << t;
      for (int64_t e = first; e < first + held; ++e)
        EXPECT_EQ(moe->stats().kept_per_expert[static_cast<size_t>(e)], one.kept_per_expert[static_cast<size_t>(e)]);
    }
    reduce_and_clip(*moe, mesh, opt, how, how.clip ? ref.norms[static_cast<size_t>(t)] : 0.0, bound);
    opt.get().step();
  }
  for (auto& [name, p] : moe->named_parameters()) {
    ASSERT_TRUE(ref.params.count(name)) << name;
    EXPECT_LE(relative_difference(p, ref.params.at(name)), bound) << name << " at ep " << ep << " " << dtype;
  }
}

TEST(DistExpertParallel, DroplessEqualsOneProcessWithIdleExperts) {
  // The routing leaves experts idle on some ranks at every step, and on every rank at some.
  const Reference ref = train_reference(base_config(std::nullopt), dist::world().size());
  bool idle_everywhere = false;
  for (const auto& s : ref.stats)
    for (int64_t k : s.kept_per_expert) idle_everywhere = idle_everywhere || k == 0;
  if (dist::world().size() == 2) {
    EXPECT_TRUE(idle_everywhere);
  }
  train_and_compare(dist::world().size(), std::nullopt);
}

TEST(DistExpertParallel, DroppingCountedAsOneProcess) {
  const Reference ref = train_reference(base_config(1.0), dist::world().size());
  int64_t dropped = 0;
  for (const auto& s : ref.stats) dropped += s.dropped;
  EXPECT_GT(dropped, 0) << "the capacity must drop slots for this test to mean anything";
  train_and_compare(dist::world().size(), 1.0);
}

// float32: one process's own float32 error (against its float64 run, the worst parameter)
// times float32_bound's path factor.
TEST(DistExpertParallel, Float32WithinTheDerivedBound) {
  const int n = dist::world().size();
  const Reference r32 = train_reference(base_config(std::nullopt), n, DType::Float32);
  const Reference r64 = train_reference(base_config(std::nullopt), n);
  double own_error = 0;
  for (const auto& [name, p] : r32.params)
    own_error = std::max(own_error, relative_difference(p.to(DType::Float64), r64.params.at(name)));
  train_and_compare(n, std::nullopt, DType::Float32, test::float32_bound(own_error));
}

TEST(DistExpertParallel, ExpertDataGroupsAtEpTwoOfFour) {
  if (dist::world().size() != 4) GTEST_SKIP() << "needs 4 ranks";
  train_and_compare(2, std::nullopt);
}

// ZeroOptimizer with the experts beside it: stage 0 (DDP) and stages 1-2 (the experts sharded
// over their expert-data group, the rest over the data group), clipped to a norm below the
// gradients' so that clipping changes every step (the norm counts each expert once); at
// ep = world with a capacity that drops slots and, on 4 ranks, dropless at ep 2 (expert-data
// groups of 2).
TEST(DistExpertParallel, BesideZeroStagesZeroToTwoWithClipping) {
  const int n = dist::world().size();
  for (int stage = 0; stage <= 2; ++stage) {
    for (int ep : {n, 2}) {
      if (ep > n || (ep == 2 && n == 2 && stage != 0)) continue;  // ep 2 of 2 once is enough
      SCOPED_TRACE("stage " + std::to_string(stage) + ", ep " + std::to_string(ep));
      // Capacity is counted over the ep group's tokens: one process's only when ep = world.
      const std::optional<double> capacity = ep == n ? std::optional<double>(1.0) : std::nullopt;
      train_and_compare(ep, capacity, DType::Float64, 1e-12, {.zero_stage = stage, .clip = 0.05});
    }
  }
}

// DistributedDataParallel with the experts beside it (their buckets over the expert-data
// group, overlapped with backward), at ep = world with dropping and, on 4 ranks, at ep 2.
TEST(DistExpertParallel, BesideDistributedDataParallel) {
  const int n = dist::world().size();
  train_and_compare(n, 1.0, DType::Float64, 1e-12, {.ddp = true});
  if (n == 4) train_and_compare(2, std::nullopt, DType::Float64, 1e-12, {.ddp = true});
}

// Stage 3 (units mixing experts and shared parameters) and HSDP are refused beside experts,
// naming the rule, before any collective.
TEST(DistExpertParallel, ZeroStageThreeBesideExpertsIsRefused) {
  auto& world = dist::world();
  dist::DeviceMesh mesh(world, {.dp = world.size(), .ep = world.size()});
  auto moe = build(parallel::expert_parallel_config(base_config(std::nullopt), mesh.group(dist::MeshDim::Expert)));
  world.reset_stats();
  test::expect_contains(test::error_of([&] {
                          parallel::ZeroOptimizer zero(
                              *moe, optim::AdamWOptions{}, mesh.group(dist::MeshDim::DataContext),
                              {.stage = 3, .experts = {.data = &mesh.group(dist::MeshDim::ExpertData)}});
                        }),
                        "stages 0-2; got stage 3");
  EXPECT_TRUE(world.stats().empty()) << "a collective ran before the refusal";
}

// Every token routed to expert 0 under a capacity: the overflow is counted (dropped slots,
// the same on every rank's report of the experts it holds), the exchanges complete on every
// rank (none hangs), and the dropped slots contribute zeros.
TEST(DistExpertParallel, RoutingEveryTokenToOneExpertReportsTheOverflow) {
  auto& world = dist::world();
  const int n = world.size();
  nn::MoEConfig config = base_config(1.0);
  config.top_k = 1;
  auto moe = build(parallel::expert_parallel_config(config, world));
  {
    NoGradGuard no_grad;  // the router sends everything to expert 0: its row alone is nonzero
    std::vector<double> bias_like(static_cast<size_t>(kExperts * kHidden), 0.0);
    for (int64_t c = 0; c < kHidden; ++c) bias_like[static_cast<size_t>(c)] = 10.0;
    moe->gate->weight.copy_(from_vector(bias_like, {kExperts, kHidden}));
  }
  parallel::enable_expert_parallel(*moe, world);
  world.reset_stats();
  const Tensor x = abs(tokens(world.rank(), 0));  // positive inputs: expert 0's logit is the largest
  Tensor y = moe->forward(x);
  sum(y).backward();
  const nn::MoEStats& stats = moe->stats();
  // One process over the n * kTokens tokens: capacity = expert_capacity of them (factor 1,
  // top-1: n * kTokens / kExperts rounded up), expert 0 keeps that many, the rest drop.
  const int64_t capacity = *moe->capacity(n * kTokens);
  ASSERT_TRUE(stats.capacity.has_value());
  EXPECT_EQ(*stats.capacity, capacity);
  EXPECT_EQ(stats.tokens_per_expert[0], kTokens);
  if (world.rank() == 0) {  // rank 0 holds expert 0
    EXPECT_EQ(stats.kept_per_expert[0], capacity);
    EXPECT_EQ(stats.dropped, n * kTokens - capacity);
  } else {
    EXPECT_EQ(stats.dropped, 0);
  }
  // The counts, dispatch and combine, and combine's backward (x needs no gradient: dispatch
  // has none), on every rank alike.
  EXPECT_EQ(world.stats().at(dist::OpType::AllToAllV).calls, 4u);
}

// Bad expert-parallel settings are refused before any collective, naming the value and the
// rule; the memory estimate names the experts per rank, the bytes and the budget.
TEST(DistExpertParallel, BadSettingsAreNamedBeforeAnyCollective) {
  auto& world = dist::world();
  world.reset_stats();
  nn::MoEConfig seven = base_config(std::nullopt);
  seven.num_experts = 7;
  if (world.size() > 1)
    test::expect_contains(test::error_of([&] { (void)parallel::expert_parallel_config(seven, world); }),
                          "must divide num_experts 7");
  nn::MoEConfig too_many = base_config(std::nullopt);
  too_many.top_k = kExperts + 1;
  test::expect_contains(test::error_of([&] { (void)parallel::expert_parallel_config(too_many, world); }),
                        std::to_string(kExperts + 1));
  const nn::MoEConfig big{.hidden_size = 4096, .intermediate_size = 14336, .num_experts = 8, .top_k = 2};
  // 8 experts of 3 x 4096 x 14336 float32 values, 4 copies each: 21 GiB at ep 1, half at ep 2.
  EXPECT_EQ(parallel::expert_training_bytes(big, 8, 4), int64_t{4} * 8 * 3 * 4096 * 14336 * 4);
  test::expect_contains(test::error_of([&] { parallel::check_expert_memory(big, 1, 4, int64_t{16} << 30); }),
                        "8 experts per rank");
  EXPECT_NO_THROW(parallel::check_expert_memory(big, 2, 4, int64_t{16} << 30));
  EXPECT_TRUE(world.stats().empty()) << "a collective ran before the refusals";
}

}  // namespace
}  // namespace strata
