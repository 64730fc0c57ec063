// optim::GradScaler with a ZeroOptimizer (stages 1 and 2, 2-4 ranks): a gradient shard is
// one rank's, so only its owner can see an overflow; every rank must still skip the step
// together (and back off the scale), then step together once the scale fits.
#include <gtest/gtest.h>

#include "distributed/dist_test_util.h"
#include "strata/optim/grad_scaler.h"
#include "strata/parallel/zero.h"
#include "strata/strata.h"

namespace strata::test {
namespace {

// One parameter vector of 4 elements per rank: element n - 1 lies in the last rank's shard.
struct Vector : nn::Module {
  Tensor w;
  explicit Vector(int64_t n) { w = register_parameter("w", zeros({n})); }
};

TEST(ZeroLossScaling, RanksAgreeOnAnOverflowOnlyOneShardHolds) {
  auto& world = dist::world();
  const int64_t n = 4 * world.size();
  for (int stage : {1, 2}) {
    Vector model(n);
    parallel::ZeroOptimizer zero(model, optim::SGDOptions{.lr = 0.5}, world, {.stage = stage});
    optim::GradScaler scaler({.init_scale = 1024.0, .growth_interval = 100});
    // d loss / d w = c; its last entry overflows float32 once scaled by 1024.
    std::vector<double> c(static_cast<size_t>(n), 1.0);
    c.back() = 1e36;
    scaler.scale(sum(mul(model.w, from_vector(c, {n}).to(DType::Float32)))).backward();
    EXPECT_FALSE(scaler.step(zero)) << "stage " << stage << ": a rank stepped although a shard held inf";
    EXPECT_TRUE(scaler.found_inf());
    scaler.update();
    EXPECT_EQ(scaler.scale_value(), 512.0);
    EXPECT_EQ(zero.full_parameters().at("w").to_vector<double>(), std::vector<double>(static_cast<size_t>(n), 0.0))
        << "stage " << stage << ": parameters changed in a skipped step";
    zero.zero_grad();
    // In range now: every rank steps, w -= 0.5 * c (the unscaled gradient, exactly).
    c.back() = 3.0;
    scaler.scale(sum(mul(model.w, from_vector(c, {n}).to(DType::Float32)))).backward();
    EXPECT_TRUE(scaler.step(zero)) << "stage " << stage;
    scaler.update();
    std::vector<double> want(static_cast<size_t>(n), -0.5);
    want.back() = -1.5;
    EXPECT_EQ(zero.full_parameters().at("w").to_vector<double>(), want) << "stage " << stage;
  }
}

}  // namespace
}  // namespace strata::test
