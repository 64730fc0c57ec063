// HSDP (ZeroOptimizer with a replicate group, parallel/hsdp.h) under mpirun -np N: on 4 ranks
// a 2 x 2 replicate x shard mesh (shard groups of 2 on one host), elsewhere 1 x N. It trains
// like ZeRO-3 over all N ranks and like one process on the same global batch; its traffic per
// step is exact; its memory is ZeRO's at the shard group's size; bad layouts are refused.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "distributed/zero_test_util.h"
#include "float32_bound.h"
#include "strata/distributed/node.h"
#include "strata/distributed/object_collectives.h"
#include "strata/parallel/hsdp.h"

namespace strata::test {
namespace {

constexpr double kClip = 0.05;  // below the tiny models' gradient norm: clipping is active

// 2 x 2 on 4 ranks; shard groups of one rank (pure replication of stage 3's shard) elsewhere.
int shard_size_for(int n) { return n == 4 ? 2 : 1; }

ZeroRun train_hsdp(Family family, int stage, DType dtype, const InnerOptimizer& inner, double clip) {
  auto& world = dist::world();
  HybridShardGroups g = make_hybrid_shard_groups(world, shard_size_for(world.size()));
  auto model = tiny_model(family, dtype);
  ZeroOptions options = zero_options(stage);
  options.replicate = g.replicate.get();
  ZeroOptimizer zero(*model, inner, *g.shard, options);
  // Each world rank its own slice of the global batch, as ZeRO over all of them.
  return run_zero_steps(*model, zero, clip, kZeroSteps);
}

double worst_norm_difference(const ZeroRun& a, const ZeroRun& b) {
  EXPECT_EQ(a.norms.size(), b.norms.size());
  double worst = 0;
  for (size_t s = 0; s < a.norms.size() && s < b.norms.size(); ++s)
    worst = std::max(worst, std::fabs(a.norms[s] - b.norms[s]) / b.norms[s]);
  return worst;
}

// ||a - b|| / ||b|| over every parameter together (the per-tensor metric's worst entry is a
// tensor whose gradients are near zero, where AdamW's steps are rounding noise).
double whole_model_difference(const StateDict& a, const StateDict& b) {
  double diff = 0, ref = 0;
  for (const auto& [name, tb] : b) {
    const std::vector<double> x = a.at(name).to_vector<double>(), y = tb.to_vector<double>();
    for (size_t i = 0; i < y.size(); ++i) {
      diff += (x[i] - y[i]) * (x[i] - y[i]);
      ref += y[i] * y[i];
    }
  }
  return std::sqrt(diff / ref);
}

bool lead() { return dist::world().rank() == 0; }
bool mentions(const std::string& msg, const std::string& part) { return msg.find(part) != std::string::npos; }

class HsdpEquivalence : public ::testing::TestWithParam<Family> {};
INSTANTIATE_TEST_SUITE_P(Models, HsdpEquivalence, ::testing::Values(Family::GPT, Family::Llama), family_name);

// 5 AdamW steps with clipping: float64 within 1e-12 (relative L2 per tensor) of ZeRO-3 over
// all ranks and of one process on the whole global batch.
TEST_P(HsdpEquivalence, Float64AdamWMatchesZeroThreeAndOneProcess) {
  const ZeroRun one = train_one_process(GetParam(), DType::Float64, adamw(), kClip);
  const ZeroRun zero3 = train_zero(GetParam(), 3, DType::Float64, adamw(), kClip);
  for (int stage : {1, 2, 3}) {
    const ZeroRun hsdp = train_hsdp(GetParam(), stage, DType::Float64, adamw(), kClip);
    const double vs_one = max_relative_difference(hsdp.params, one.params);
    const double vs_zero3 = max_relative_difference(hsdp.params, zero3.params);
    EXPECT_LE(vs_one, 1e-12) << "stage " << stage;
    EXPECT_LE(vs_zero3, 1e-12) << "stage " << stage;
    EXPECT_LE(worst_norm_difference(hsdp, one), 1e-12) << "stage " << stage << ": clipping norms";
    if (lead())
      std::printf("HSDP stage %d float64 AdamW, N=%d: vs one process %.3g, vs ZeRO-3 %.3g\n", stage,
                  dist::world().size(), vs_one, vs_zero3);
  }
}

// Float32 AdamW, 5 steps: against one process and ZeRO-3, per tensor and over the whole
// model, within the bound derived from the one process's own float32 error against its
// float64 run (float32_bound.h).
TEST_P(HsdpEquivalence, Float32AdamWWithinTheDerivedBound) {
  const ZeroRun one32 = train_one_process(GetParam(), DType::Float32, adamw(), 0);
  const double own =
      max_relative_difference(one32.params, train_one_process(GetParam(), DType::Float64, adamw(), 0).params);
  const ZeroRun zero3 = train_zero(GetParam(), 3, DType::Float32, adamw(), 0);
  const ZeroRun hsdp = train_hsdp(GetParam(), 3, DType::Float32, adamw(), 0);
  const std::string n = " N=" + std::to_string(dist::world().size());
  const double vs_one = max_relative_difference(hsdp.params, one32.params);
  EXPECT_TRUE(within_float32_bound(vs_one, own, "HSDP float32 AdamW vs one process" + n, lead()));
  EXPECT_TRUE(
      within_float32_bound(max_relative_difference(hsdp.params, zero3.params), own, "HSDP vs ZeRO-3" + n, lead()));
  const double whole = whole_model_difference(hsdp.params, one32.params);
  const double whole_own =
      whole_model_difference(one32.params, train_one_process(GetParam(), DType::Float64, adamw(), 0).params);
  // The 1e-5 on this metric sits just above the one process's own float32 error
  // (5e-6 to 9e-6 here): the derived bound is what holds on any kernel selection.
  EXPECT_TRUE(within_float32_bound(whole, whole_own, "HSDP whole model vs one process" + n, lead()));
}

// Gradient accumulation: each rank's slice as 2 micro-batches, the first under no_sync()
// (no reduction in either group), then one synchronised backward: float64 within 1e-12 of
// one process on the whole global batch.
TEST(Hsdp, NoSyncAccumulationMatchesOneProcess) {
  auto& world = dist::world();
  HybridShardGroups g = make_hybrid_shard_groups(world, shard_size_for(world.size()));
  auto model = tiny_model(Family::GPT, DType::Float64);
  ZeroOptions options = zero_options(3);
  options.replicate = g.replicate.get();
  ZeroOptimizer zero(*model, adamw(), *g.shard, options);
  for (int s = 0; s < kZeroSteps; ++s) {
    Batch mine = rank_slice(global_batch(s, world.size() * kZeroPerRank, *model), world.rank(), kZeroPerRank);
    for (int64_t m = 0; m < kZeroPerRank; ++m) {
      Batch micro = rank_slice(mine, static_cast<int>(m), 1);
      Tensor loss = mul(model->loss(micro.inputs, micro.targets), 1.0 / kZeroPerRank);
      if (m + 1 < kZeroPerRank) {
        g.replicate->reset_stats();
        auto guard = zero.no_sync();
        loss.backward();
        EXPECT_EQ(g.replicate->stats()[dist::OpType::AllReduce].calls, 0u) << "no_sync() reduced across replicas";
      } else {
        loss.backward();
      }
    }
    zero.clip_grad_norm(kClip);
    zero.step();
    zero.zero_grad();
  }
  const ZeroRun one = train_one_process(Family::GPT, DType::Float64, adamw(), kClip);
  EXPECT_LE(max_relative_difference(zero.full_parameters(), one.params), 1e-12);
}

// Per step, from the groups' counters (bytes as ProcessGroup counts them: the input of a
// reduce_scatter or all_reduce, an all_gather's contribution). Inside the shard group: the
// reduce_scatter of every padded unit, two all_gathers of its shard (forward and backward)
// and the gradient flags. Across it: one all_reduce of every shard (padded / S bytes) and the
// flags again. Nothing on the world group.
TEST(Hsdp, TrafficPerStepInsideAndAcrossShardGroups) {
  auto& world = dist::world();
  const int n = world.size(), s = shard_size_for(n), r = n / s;
  HybridShardGroups g = make_hybrid_shard_groups(world, s);
  ASSERT_EQ(g.shard->size(), s);
  ASSERT_EQ(g.replicate->size(), r);
  nn::GPT model(tiny_gpt(DType::Float32));
  ZeroOptions options = zero_options(3);
  options.replicate = g.replicate.get();
  ZeroOptimizer zero(model, adamw(), *g.shard, options);
  uint64_t padded = 0;
  for (int64_t b : zero.bucket_bytes()) padded += static_cast<uint64_t>(b);
  const uint64_t units = zero.bucket_bytes().size();
  const uint64_t flag_bytes = model.parameters().size() * sizeof(int64_t);
  for (int step = 0; step < 2; ++step) {
    for (dist::ProcessGroup* pg : {&world, g.shard.get(), g.replicate.get()}) pg->reset_stats();
    Batch mine = rank_slice(global_batch(step, n * kZeroPerRank, model.config()), world.rank(), kZeroPerRank);
    model.loss(mine.inputs, mine.targets).backward();
    zero.clip_grad_norm(kClip);
    zero.step();
    zero.zero_grad();
    auto intra = g.shard->stats();
    auto inter = g.replicate->stats();
    const std::string where = "step " + std::to_string(step) + " N=" + std::to_string(n);
    EXPECT_EQ(intra[dist::OpType::ReduceScatter].calls, units) << where;
    EXPECT_EQ(intra[dist::OpType::ReduceScatter].bytes, padded) << where;
    EXPECT_EQ(intra[dist::OpType::AllGather].calls, 2 * units) << where;
    EXPECT_EQ(intra[dist::OpType::AllGather].bytes, 2 * padded / s) << where;
    // The gradient flags, and (with more than one shard) clipping's sum of squares.
    const uint64_t norm_sums = s > 1 ? 1 : 0;
    EXPECT_EQ(intra[dist::OpType::AllReduce].calls, 1 + norm_sums) << where;
    EXPECT_EQ(intra[dist::OpType::AllReduce].bytes, flag_bytes + norm_sums * 2 * sizeof(double)) << where;
    EXPECT_EQ(inter[dist::OpType::AllReduce].calls, units + 1) << where << ": one per unit's shard, and the flags";
    EXPECT_EQ(inter[dist::OpType::AllReduce].bytes, padded / s + flag_bytes) << where;
    for (auto op : {dist::OpType::ReduceScatter, dist::OpType::AllGather, dist::OpType::Broadcast})
      EXPECT_EQ(inter[op].calls, 0u) << where;
    for (const auto& [op, counter] : world.stats()) EXPECT_EQ(counter.calls, 0u) << where << " on the world group";
    // Across shard groups a ring all_reduce moves 2(R-1)/R of its bytes per rank: 1/S of the
    // padded model per rank (plus the flags), where ZeRO-3 over all N ranks sends its whole
    // reduce_scatter and all_gathers over the same ring.
    const double across = 2.0 * (r - 1) / r * static_cast<double>(padded / s);
    const double zero3_ring = 3.0 * (n - 1) / n * static_cast<double>(padded);
    if (r > 1) {
      EXPECT_LE(across, zero3_ring / s) << where;
    }
  }
}

// Memory is ZeRO-3's at the shard group's size: every bucket's shard is padded / S.
TEST(Hsdp, MemoryIsZeroThreeAtTheShardGroupSize) {
  auto& world = dist::world();
  const int s = shard_size_for(world.size());
  HybridShardGroups g = make_hybrid_shard_groups(world, s);
  nn::GPT model(tiny_gpt(DType::Float32));
  ZeroOptions options = zero_options(3);
  options.replicate = g.replicate.get();
  ZeroOptimizer zero(model, adamw(), *g.shard, options);
  Batch mine = rank_slice(global_batch(0, world.size() * kZeroPerRank, model.config()), world.rank(), kZeroPerRank);
  model.loss(mine.inputs, mine.targets).backward();
  zero.step();
  int64_t padded = 0;
  for (int64_t b : zero.bucket_bytes()) padded += b;
  const ZeroMemory m = zero.memory();
  EXPECT_EQ(m.parameters, padded / s);
  EXPECT_EQ(m.gradients, padded / s);
  EXPECT_EQ(m.master, 0);  // float32 parameters are their own master
  // AdamW: exp_avg and exp_avg_sq of the shard's pieces (padding excluded), plus a step
  // counter per piece.
  const int64_t pieces = static_cast<int64_t>(zero.owned_pieces().size());
  int64_t owned = 0;
  for (const auto& p : zero.owned_pieces()) owned += p.numel;
  EXPECT_GE(m.optimizer_state, 2 * owned * 4);
  EXPECT_LE(m.optimizer_state, 2 * owned * 4 + pieces * 8);
  EXPECT_LE(padded / s - owned * 4, static_cast<int64_t>(zero.bucket_bytes().size()) * 4)
      << "padding below S elements a unit";
}

TEST(HsdpErrors, ShardSizeThatDoesNotDivideTheDataGroup) {
  auto& world = dist::world();
  const int n = world.size();
  if (n < 2) GTEST_SKIP() << "needs two ranks";
  const std::string msg = error_of([&] { make_hybrid_shard_groups(world, n + 1); });
  EXPECT_TRUE(mentions(msg, "shard size " + std::to_string(n + 1))) << msg;
  EXPECT_TRUE(mentions(msg, "does not divide the data group's " + std::to_string(n) + " ranks")) << msg;
  const std::string negative = error_of([&] { make_hybrid_shard_groups(world, -2); });
  EXPECT_TRUE(mentions(negative, "shard size -2 must be positive")) << negative;
  // The world still works: every rank refused alike, no collective left half-issued.
  Tensor t = full({1}, 1.0);
  world.all_reduce(t)->wait();
  EXPECT_EQ(t.item(), n);
}

TEST(HsdpErrors, ReplicateGroupNeedsAShardingStageAndDisjointGroups) {
  auto& world = dist::world();
  HybridShardGroups g = make_hybrid_shard_groups(world, 1);
  nn::GPT model(tiny_gpt(DType::Float32));
  ZeroOptions stage0 = zero_options(0);
  stage0.replicate = g.replicate.get();
  const std::string msg = error_of([&] { ZeroOptimizer zero(model, sgd(), *g.shard, stage0); });
  EXPECT_TRUE(mentions(msg, "needs stage 1, 2 or 3")) << msg;
  if (world.size() < 2) return;
  ZeroOptions both = zero_options(3);
  both.replicate = &world;  // shares every rank with the shard group `world`
  const std::string overlap = error_of([&] { ZeroOptimizer zero(model, sgd(), world, both); });
  EXPECT_TRUE(mentions(overlap, "is in both the shard group")) << overlap;
}

// On 2 nodes of 2 ranks: pretend ones (STRATA_TEST_NODE_SIZE=2, ctest
// dist_zero_hsdp_nodes_np4) or the cluster test's 2 namespaced hosts (tests/cluster). The
// default shard group is the node; a shard size spanning nodes is refused, naming them.
TEST(HsdpNodes, DefaultShardGroupIsTheNodeAndSpanningNodesIsRefused) {
  auto& world = dist::world();
  const std::vector<std::string> nodes = dist::all_gather_strings(world, dist::node_name());
  if (world.size() != 4 || nodes[0] != nodes[1] || nodes[2] != nodes[3] || nodes[0] == nodes[2])
    GTEST_SKIP() << "needs 2 nodes of 2 ranks (STRATA_TEST_NODE_SIZE=2 or 2 hosts)";
  HybridShardGroups g = make_hybrid_shard_groups(world);
  EXPECT_EQ(g.shard_size, 2);
  EXPECT_EQ(g.replicas, 2);
  EXPECT_EQ(g.shard->global_ranks(), (std::vector<int>{world.rank() / 2 * 2, world.rank() / 2 * 2 + 1}));
  EXPECT_EQ(g.replicate->global_ranks(), (std::vector<int>{world.rank() % 2, world.rank() % 2 + 2}));
  const std::string msg = error_of([&] { make_hybrid_shard_groups(world, 4); });
  EXPECT_TRUE(mentions(msg, "shard size 4 does not match the nodes")) << msg;
  EXPECT_TRUE(mentions(msg, nodes[0] + ": ranks 0,1")) << msg;
  EXPECT_TRUE(mentions(msg, nodes[2] + ": ranks 2,3")) << msg;
  EXPECT_EQ(make_hybrid_shard_groups(world, 1).replicas, 4) << "a shard group inside a node is fine";
}

}  // namespace
}  // namespace strata::test
