// DistributedDataParallel on bad or unusual input: every rank fails alike (none hangs), and
// the group stays usable afterwards.
#include <chrono>

#include "distributed/ddp_test_util.h"

namespace strata::test {
namespace {

// loss = sum(a * x) [+ sum(b * x)]: gradients are x, so exact in any dtype.
class TwoWeights : public nn::Module {
 public:
  explicit TwoWeights(int64_t width = 4) {
    a = register_parameter("a", full({width}, 1.0, {.dtype = DType::Float64}));
    b = register_parameter("b", full({width}, 2.0, {.dtype = DType::Float64}));
  }
  Tensor loss(const Tensor& x, bool use_b) { return use_b ? sum(a * x) + sum(b * x) : sum(a * x); }
  Tensor a, b;
};

Tensor input_of(int rank) { return full({4}, rank + 1.0, {.dtype = DType::Float64}); }
// The average over ranks of (rank + 1).
double mean_input(int n) { return (n + 1) / 2.0; }

TEST(DDPErrors, DifferentModelsFailOnEveryRank) {
  auto& world = dist::world();
  if (world.size() == 1) GTEST_SKIP() << "needs two ranks";
  const bool odd = world.rank() == world.size() - 1;
  TwoWeights model(odd ? 5 : 4);
  const std::string msg = error_of([&] { DistributedDataParallel ddp(model, world); });
  EXPECT_NE(msg.find("parameter #0 is 'a' [4] float64 on rank 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'a' [5] float64 on rank " + std::to_string(world.size() - 1)), std::string::npos) << msg;
  // The group still works.
  Tensor t = full({1}, 1.0);
  world.all_reduce(t)->wait();
  EXPECT_EQ(t.item(), world.size());
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A copy of the world with its own (short) timeout, so that a timed-out group is not the world.
std::unique_ptr<dist::ProcessGroup> fresh_group(const std::string& name, std::chrono::milliseconds timeout) {
  auto& world = dist::world();
  std::vector<int> all;
  for (int r = 0; r < world.size(); ++r) all.push_back(r);
  auto g = world.split(all, name);
  g->set_timeout(timeout);
  return g;
}

// Every rank leaves `b` unused: every rank detects it locally and throws, naming it. The
// detection costs no communication: the step issues exactly the gradient all_reduces.
TEST(DDPErrors, UnusedParameterOnEveryRankFailsOnEveryRank) {
  auto& world = dist::world();
  const int n = world.size();
  TwoWeights model;
  DistributedDataParallel ddp(model, world);
  world.reset_stats();
  const std::string msg = error_of([&] { model.loss(input_of(world.rank()), false).backward(); });
  EXPECT_TRUE(
      contains(msg, "parameter 'b' received no gradient in this backward pass on rank " + std::to_string(world.rank())))
      << msg;
  EXPECT_TRUE(contains(msg, "find_unused_parameters")) << msg;
  auto stats = world.stats();
  EXPECT_EQ(stats[dist::OpType::AllReduce].calls, ddp.bucket_bytes().size());
  EXPECT_EQ(stats[dist::OpType::AllReduce].bytes, 2u * 4 * sizeof(double));
  // The gradient that did arrive was still averaged; the next, correct, step works.
  EXPECT_EQ(model.a.grad().to_vector<double>()[0], mean_input(n));
  model.zero_grad();
  model.loss(input_of(world.rank()), true).backward();
  EXPECT_EQ(model.a.grad().to_vector<double>()[0], mean_input(n));
  EXPECT_EQ(model.b.grad().to_vector<double>()[0], mean_input(n));
}

// Only the last rank leaves `b` unused (in the first, rebuilding, pass): it throws, naming
// `b`; the others return with b's gradient averaged with its zero. All issued the same
// collectives (the rebuild's broadcast included), so a rank that catches the error and
// carries on stays in step.
TEST(DDPErrors, UnusedParameterOnSomeRanksFailsThereAndStaysInStep) {
  auto& world = dist::world();
  const int n = world.size();
  if (n == 1) GTEST_SKIP() << "needs two ranks";
  const bool skips = world.rank() == n - 1;
  TwoWeights model;
  DistributedDataParallel ddp(model, world);
  const std::string msg = error_of([&] { model.loss(input_of(world.rank()), !skips).backward(); });
  if (skips) {
    EXPECT_TRUE(
        contains(msg, "parameter 'b' received no gradient in this backward pass on rank " + std::to_string(n - 1)))
        << msg;
  } else {
    EXPECT_EQ(msg, "");
    double expected_b = 0;
    for (int r = 0; r < n - 1; ++r) expected_b += r + 1.0;
    EXPECT_DOUBLE_EQ(model.b.grad().to_vector<double>()[0], expected_b / n);
  }
  EXPECT_TRUE(ddp.buckets_rebuilt());
  model.zero_grad();
  model.loss(input_of(world.rank()), true).backward();
  EXPECT_EQ(model.a.grad().to_vector<double>()[0], mean_input(n));
  EXPECT_EQ(model.b.grad().to_vector<double>()[0], mean_input(n));
}

// ... and when the rank that threw stops (its program ends), the others fail at their next
// collective after the group's timeout, naming it.
TEST(DDPErrors, UnusedParameterOnSomeRanksThenStopTimesOutNamingThem) {
  auto& world = dist::world();
  const int n = world.size();
  if (n == 1) GTEST_SKIP() << "needs two ranks";
  auto group = fresh_group("ddp_unused", std::chrono::milliseconds(1000));
  {
    const bool skips = world.rank() == n - 1;
    TwoWeights model;
    DistributedDataParallel ddp(model, *group, {.rebuild_buckets = false});
    const std::string msg = error_of([&] { model.loss(input_of(world.rank()), !skips).backward(); });
    EXPECT_EQ(contains(msg, "parameter 'b' received no gradient"), skips) << msg;
    if (!skips) {
      const std::string next = error_of([&] { model.loss(input_of(world.rank()), true).backward(); });
      EXPECT_TRUE(contains(next, "gradient reduction failed")) << next;
      EXPECT_TRUE(contains(next, "timed out after 1000 ms")) << next;
      EXPECT_TRUE(contains(next, "group 'ddp_unused'")) << next;
      EXPECT_TRUE(contains(next, "ranks " + std::to_string(n - 1) + " of " + std::to_string(n) + " had not reached it"))
          << next;
    }
  }
  world.barrier()->wait();
}

// With find_unused_parameters a parameter without gradient is reduced with its (zero)
// gradient, and nothing else is communicated either.
TEST(DDPErrors, UnusedParameterAllowedIsReducedAsZero) {
  auto& world = dist::world();
  const int n = world.size();
  TwoWeights model;
  DistributedDataParallel ddp(model, world, {.find_unused_parameters = true});
  const bool use_b = world.rank() != n - 1;
  world.reset_stats();
  model.loss(input_of(world.rank()), use_b).backward();
  // b's gradient is the average with zero from the last rank; when no rank used it (one
  // rank), it has none, as in one process.
  double expected_b = 0;
  for (int r = 0; r < n - 1; ++r) expected_b += r + 1.0;
  EXPECT_EQ(model.a.grad().to_vector<double>()[0], mean_input(n));
  ASSERT_EQ(model.b.grad().defined(), n > 1);
  if (n > 1) {
    EXPECT_DOUBLE_EQ(model.b.grad().to_vector<double>()[0], expected_b / n);
  }
  // The buckets, then one flag per parameter.
  EXPECT_EQ(world.stats()[dist::OpType::AllReduce].bytes, 2u * 4 * sizeof(double) + 2u * sizeof(int64_t));
}

// Two backward passes without a step: the second reduces again; with averaging the result
// is the sum of the two averaged gradients, as one process accumulating two passes would get.
TEST(DDPErrors, SecondBackwardWithoutStepAccumulates) {
  auto& world = dist::world();
  const int n = world.size();
  TwoWeights model;
  DistributedDataParallel ddp(model, world);
  model.loss(input_of(world.rank()), true).backward();
  model.loss(input_of(world.rank()) * 3.0, true).backward();
  EXPECT_DOUBLE_EQ(model.a.grad().to_vector<double>()[0], 4 * mean_input(n));
  EXPECT_DOUBLE_EQ(model.b.grad().to_vector<double>()[3], 4 * mean_input(n));
}

// A gradient that is no longer the bucket view (set_to_none, set_grad) is copied back into
// its slot, and the view becomes the gradient again.
TEST(DDPErrors, DetachedGradientIsRepointed) {
  auto& world = dist::world();
  const int n = world.size();
  TwoWeights model;
  DistributedDataParallel ddp(model, world, {.rebuild_buckets = false});
  model.loss(input_of(world.rank()), true).backward();
  const void* slot = model.a.grad().raw_data();
  model.zero_grad(/*set_to_none=*/true);
  model.b.set_grad(full({4}, 0.0, {.dtype = DType::Float64}));
  model.loss(input_of(world.rank()), true).backward();
  EXPECT_EQ(model.a.grad().raw_data(), slot);
  EXPECT_EQ(model.a.grad().to_vector<double>()[1], mean_input(n));
  EXPECT_EQ(model.b.grad().to_vector<double>()[1], mean_input(n));
}

// A parameter tensor swapped out of the graph (the forward uses another tensor) gets no
// gradient: every rank fails, naming it.
TEST(DDPErrors, ReplacedParameterIsReported) {
  auto& world = dist::world();
  TwoWeights model;
  DistributedDataParallel ddp(model, world);
  Tensor replacement = model.b.detach().clone().set_requires_grad(true);
  const std::string msg = error_of([&] { (sum(model.a * input_of(0)) + sum(replacement)).backward(); });
  EXPECT_NE(msg.find("parameter 'b' received no gradient"), std::string::npos) << msg;
}

// Ranks with different batch sizes: gradients are still averaged per rank (each rank's mean
// loss counts equally), so the result is not the per-token mean of the union; it is
// identical on all ranks.
TEST(DDPErrors, DifferentBatchSizesAverageRankMeans) {
  auto& world = dist::world();
  const int n = world.size();
  nn::GPT model(tiny_gpt(DType::Float64));
  DistributedDataParallel ddp(model, world);
  Batch b = global_batch(0, world.rank() + 1, model.config());
  model.loss(b.inputs, b.targets).backward();
  Tensor g = model.parameters()[0].grad().clone();
  Tensor lo = g.clone(), hi = g.clone();
  world.all_reduce(lo, dist::ReduceOp::Min)->wait();
  world.all_reduce(hi, dist::ReduceOp::Max)->wait();
  EXPECT_EQ(lo.to_vector<double>(), g.to_vector<double>());
  EXPECT_EQ(hi.to_vector<double>(), g.to_vector<double>());
  (void)n;
}

}  // namespace
}  // namespace strata::test
