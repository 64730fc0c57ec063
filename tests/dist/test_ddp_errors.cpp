// DistributedDataParallel on bad or unusual input: every rank fails alike (none hangs), and
// the group stays usable afterwards.
#include "ddp_test_util.h"

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

TEST(DDPErrors, UnusedParameterFailsOnEveryRankUnlessAllowed) {
  auto& world = dist::world();
  const int n = world.size();
  {
    TwoWeights model;
    DistributedDataParallel ddp(model, world);
    // Only the last rank leaves `b` unused: the others have reduced every bucket already.
    const bool use_b = world.rank() != n - 1;
    const std::string msg = error_of([&] { model.loss(input_of(world.rank()), use_b).backward(); });
    EXPECT_NE(msg.find("parameter 'b' received no gradient"), std::string::npos) << msg;
    EXPECT_NE(msg.find("find_unused_parameters"), std::string::npos) << msg;
    // The next, correct, step works on every rank.
    model.zero_grad();
    model.loss(input_of(world.rank()), true).backward();
    EXPECT_EQ(model.a.grad().to_vector<double>()[0], mean_input(n));
  }
  {
    TwoWeights model;
    DistributedDataParallel ddp(model, world, {.find_unused_parameters = true});
    const bool use_b = world.rank() != n - 1;
    model.loss(input_of(world.rank()), use_b).backward();
    // b's gradient is the average with zero from the last rank.
    double expected_b = 0;
    for (int r = 0; r < n - 1; ++r) expected_b += r + 1.0;
    EXPECT_EQ(model.a.grad().to_vector<double>()[0], mean_input(n));
    EXPECT_DOUBLE_EQ(model.b.grad().to_vector<double>()[0], expected_b / n);
  }
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
