// ZeroOptimizer on bad input: clear errors saying what was found and what was expected.
#include "distributed/zero_test_util.h"

namespace strata::test {
namespace {

bool mentions(const std::string& msg, const std::string& part) { return msg.find(part) != std::string::npos; }

TEST(ZeroErrors, StageOutsideZeroToThree) {
  auto& world = dist::world();
  for (int stage : {-1, 4}) {
    nn::GPT model(tiny_gpt(DType::Float32));
    const std::string msg = error_of([&] { ZeroOptimizer zero(model, sgd(), world, zero_options(stage)); });
    EXPECT_TRUE(mentions(msg, "stage " + std::to_string(stage))) << msg;
    EXPECT_TRUE(mentions(msg, "expected 0 (DDP), 1")) << msg;
  }
}

// An optimizer whose update is not elementwise (here: SGD claiming so) cannot be sharded.
class NotElementwise : public optim::SGD {
 public:
  using optim::SGD::SGD;
  bool is_elementwise() const override { return false; }
};

TEST(ZeroErrors, OptimizerWhoseStateCannotBeSharded) {
  auto& world = dist::world();
  OptimizerFactory factory = [](std::vector<optim::ParamGroup> groups) -> std::unique_ptr<optim::Optimizer> {
    return std::make_unique<NotElementwise>(std::move(groups));
  };
  for (int stage : {1, 2, 3}) {
    nn::GPT model(tiny_gpt(DType::Float32));
    const std::string msg = error_of([&] { ZeroOptimizer zero(model, factory, world, zero_options(stage)); });
    EXPECT_TRUE(mentions(msg, "elementwise")) << msg;
    EXPECT_TRUE(mentions(msg, "stage " + std::to_string(stage))) << msg;
  }
  nn::GPT model(tiny_gpt(DType::Float32));
  EXPECT_EQ(error_of([&] { ZeroOptimizer zero(model, factory, world, zero_options(0)); }), "")
      << "stage 0 keeps whole parameters: any optimizer works";
}

TEST(ZeroErrors, RanksWithDifferentParameters) {
  auto& world = dist::world();
  if (world.size() == 1) GTEST_SKIP() << "needs two ranks";
  nn::GPTConfig config = tiny_gpt(DType::Float32);
  if (world.rank() == 1) config.n_embd = 16;
  nn::GPT model(config);
  const std::string msg = error_of([&] { ZeroOptimizer zero(model, sgd(), world, zero_options(2)); });
  EXPECT_TRUE(mentions(msg, "hold different parameters")) << msg;
  EXPECT_TRUE(mentions(msg, "'wte.weight'")) << msg;
}

TEST(ZeroErrors, ParameterGroupsMustCoverEveryParameterOnce) {
  auto& world = dist::world();
  nn::GPT model(tiny_gpt(DType::Float32));
  std::vector<optim::ParamGroup> groups(1);
  groups[0].params = {model.wte->weight};
  const std::string msg = error_of([&] { ZeroOptimizer zero(model, sgd(), world, zero_options(1), groups); });
  EXPECT_TRUE(mentions(msg, "in none of the parameter groups")) << msg;
}

// Stage 1 reduces its gradient buckets in place; a second backward on top is refused.
TEST(ZeroErrors, StageOneSecondBackwardWithoutZeroGrad) {
  auto& world = dist::world();
  nn::GPT model(tiny_gpt(DType::Float32));
  ZeroOptimizer zero(model, sgd(), world, zero_options(1));
  Batch mine = rank_slice(global_batch(0, world.size() * kZeroPerRank, model.config()), world.rank(), kZeroPerRank);
  model.loss(mine.inputs, mine.targets).backward();
  const std::string msg = error_of([&] { model.loss(mine.inputs, mine.targets).backward(); });
  EXPECT_TRUE(mentions(msg, "without zero_grad()")) << msg;
}

// Stages 2 and 3 accumulate two backward passes in the shard: the same as stage 0.
TEST(ZeroErrors, AccumulationOverTwoBackwardPasses) {
  auto& world = dist::world();
  auto run = [&](int stage) {
    nn::GPT model(tiny_gpt(DType::Float64));
    ZeroOptimizer zero(model, sgd(), world, zero_options(stage));
    for (int s = 0; s < 2; ++s) {
      for (int m = 0; m < 2; ++m) {
        Batch mine = rank_slice(global_batch(2 * s + m, world.size() * kZeroPerRank, model.config()), world.rank(),
                                kZeroPerRank);
        (model.loss(mine.inputs, mine.targets) * 0.5).backward();
      }
      zero.step();
      zero.zero_grad();
    }
    return zero.full_parameters();
  };
  StateDict ref = run(0);
  for (int stage : {2, 3}) EXPECT_LE(max_relative_difference(run(stage), ref), 1e-12) << "stage " << stage;
}

// A step between a forward and its backward rewrites the parameters that forward saved (stage
// 3's gather would bring the new values back into them): the backward is refused on every rank
// at every stage, as torch refuses it, instead of computing gradients from the new weights.
TEST(ZeroErrors, StepBetweenForwardAndBackwardRefusesThatBackward) {
  auto& world = dist::world();
  for (int stage : {0, 1, 2, 3}) {
    nn::GPT model(tiny_gpt(DType::Float32));
    ZeroOptimizer zero(model, sgd(), world, zero_options(stage));
    Batch mine = rank_slice(global_batch(0, world.size() * kZeroPerRank, model.config()), world.rank(), kZeroPerRank);
    model.loss(mine.inputs, mine.targets).backward();
    Tensor stale = model.loss(mine.inputs, mine.targets);
    zero.step();
    zero.zero_grad();
    const std::string msg = error_of([&] { stale.backward(); });
    EXPECT_TRUE(mentions(msg, "modified by an inplace operation")) << "stage " << stage << ": " << msg;
    EXPECT_TRUE(mentions(msg, "expected version")) << "stage " << stage << ": " << msg;
  }
}

}  // namespace
}  // namespace strata::test
