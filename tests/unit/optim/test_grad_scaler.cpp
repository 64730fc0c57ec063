// Loss scaling (optim::GradScaler) and the multi-tensor gradient operations under it: the
// unscale's inf/nan check, the fixed-order sum of squares behind clip_grad_norm.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "optim/multi_tensor.h"
#include "strata/strata.h"
#include "strata_kernels/common/chunk_reduce.h"
#include "strata_kernels/common/grad_ops.h"
#include "test_util.h"

using namespace strata;

namespace {

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.numel() == b.numel() &&
         std::memcmp(a.contiguous().raw_data(), b.contiguous().raw_data(), a.nbytes()) == 0;
}

std::vector<Tensor> random_tensors(const std::vector<int64_t>& sizes, DType dtype, uint64_t seed) {
  Generator gen(seed);
  std::vector<Tensor> out;
  for (int64_t n : sizes) out.push_back(randn({n}, {.dtype = dtype}, &gen));
  return out;
}

nn::GPTConfig tiny_gpt() {
  return {.vocab_size = 13, .context = 8, .n_layer = 2, .n_head = 2, .n_embd = 16, .seed = 5};
}

}  // namespace

// The reduction's order is fixed by chunk_reduce.h, so the thread count cannot change the
// bits; and the replay below is that order written out.
TEST(MultiTensorReduce, SumOfSquaresIsTheSameForAnyThreadCountAndFollowsTheLaneOrder) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    const std::vector<Tensor> ts = random_tensors({1, 255, 256, 257, 70000, 200003}, dtype, 3);
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const double one = optim::multi_tensor::sum_of_squares(ts, 4096);
    omp_set_num_threads(2);
    const double two = optim::multi_tensor::sum_of_squares(ts, 4096);
    omp_set_num_threads(threads);
    EXPECT_EQ(std::memcmp(&one, &two, sizeof one), 0) << dtype;

    // The documented order, written out: chunks of 4096, 256 lanes, pairwise halving.
    double expected = 0.0;
    for (const Tensor& t : ts) {
      const Tensor d = t.to(DType::Float64);
      const double* x = d.data<double>();
      for (int64_t b = 0; b < t.numel(); b += 4096) {
        std::vector<double> lanes(strata_kernels::kReduceLanes, 0.0);
        for (int64_t i = b; i < std::min(t.numel(), b + 4096); ++i) lanes[(i - b) % 256] += x[i] * x[i];
        for (int s = 128; s > 0; s /= 2)
          for (int l = 0; l < s; ++l) lanes[l] += lanes[l + s];
        expected += lanes[0];
      }
    }
    EXPECT_EQ(one, expected) << dtype;
    double naive = 0.0;
    for (const Tensor& t : ts)
      for (double v : t.to_vector<double>()) naive += v * v;
    EXPECT_NEAR(one, naive, 1e-12 * naive);
  }
}

TEST(MultiTensorReduce, UnscaleFindsInfAndNanAnywhereAndScalesEveryElement) {
  for (double bad : {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN()}) {
    std::vector<Tensor> ts = random_tensors({300, 70001}, DType::Float32, 7);
    const std::vector<Tensor> before = {ts[0].clone(), ts[1].clone()};
    EXPECT_FALSE(optim::multi_tensor::unscale_and_check(ts, 0.25, 1000));
    for (int i = 0; i < 2; ++i) EXPECT_TRUE(same_bytes(ts[i], mul(before[i], 0.25)));
    ts[1].data<float>()[65537] = static_cast<float>(bad);  // deep inside a later chunk
    EXPECT_TRUE(optim::multi_tensor::unscale_and_check(ts, 2.0, 1000)) << bad;
  }
  strata::testing::expect_error_mentions(
      [] { optim::multi_tensor::unscale_and_check(std::vector{ones({2}, {.dtype = DType::BFloat16})}, 1.0); },
      {"unscale: tensor 0", "bfloat16"});
}

TEST(GradScaler, BacksOffOnInfGrowsAfterTheIntervalAndSkipsTheStep) {
  Tensor w = ones({4});
  w.set_requires_grad(true);
  optim::SGD sgd({w}, {.lr = 0.5});
  optim::GradScaler scaler({.init_scale = 1024, .growth_interval = 2});
  const auto step_with_grad = [&](float g) {
    w.set_grad(full({4}, g * scaler.scale_value()));
    const bool stepped = scaler.step(sgd);
    scaler.update();
    return stepped;
  };
  EXPECT_TRUE(step_with_grad(1.0f));  // unscaled to 1: w = 1 - 0.5
  EXPECT_EQ(w.detach().to_vector<float>(), std::vector<float>(4, 0.5f));
  EXPECT_EQ(scaler.scale_value(), 1024);
  EXPECT_TRUE(step_with_grad(1.0f));
  EXPECT_EQ(scaler.scale_value(), 2048);  // two good steps: grown
  EXPECT_FALSE(step_with_grad(std::numeric_limits<float>::infinity()));
  EXPECT_TRUE(scaler.found_inf());
  EXPECT_EQ(scaler.scale_value(), 1024);                                  // backed off
  EXPECT_EQ(w.detach().to_vector<float>(), std::vector<float>(4, 0.0f));  // the skipped step changed nothing
  EXPECT_EQ(scaler.state_dict().at("growth_tracker").item(), 0);

  optim::GradScaler copy;
  copy.load_state_dict(scaler.state_dict());
  EXPECT_EQ(copy.scale_value(), 1024);
  strata::testing::expect_error_mentions([&] { scaler.update(); }, {"no step() since the last update()"});
  w.set_grad(ones({4}));
  scaler.unscale(sgd);
  strata::testing::expect_error_mentions([&] { scaler.unscale(sgd); }, {"unscaled twice"});
  strata::testing::expect_error_mentions(
      [&] {
        copy.load_state_dict({{"scale", scalar_tensor(-1.0)}});
      },
      {"growth_tracker", "missing"});
  strata::testing::expect_error_mentions([] { optim::GradScaler({.backoff_factor = 1.5}); }, {"backoff_factor"});
}

// End to end on a GPT: a scale so large that the first steps overflow, and a growth
// interval short enough to overflow again later. Every skipped step retries its batch. The
// steps taken equal unscaled training bit for bit (power-of-two scales are exact).
TEST(GradScaler, TrainingWithOverflowingScalesEqualsUnscaledTrainingBitForBit) {
  nn::GPT plain(tiny_gpt()), scaled(tiny_gpt());
  optim::AdamW plain_opt(plain.parameters(), {.lr = 1e-2}), scaled_opt(scaled.parameters(), {.lr = 1e-2});
  optim::GradScaler scaler({.init_scale = std::ldexp(1.0, 140), .growth_interval = 2});
  Generator gen(11);
  int skipped = 0, grown = 0;
  for (int step = 0; step < 8; ++step) {
    const Tensor x = randint(0, 13, {2, 8}, {.dtype = DType::Int64}, &gen);
    const Tensor y = randint(0, 13, {2, 8}, {.dtype = DType::Int64}, &gen);
    plain_opt.zero_grad();
    plain.loss(x, y).backward();
    optim::clip_grad_norm(plain.parameters(), 0.5);
    plain_opt.step();
    for (;;) {
      scaled_opt.zero_grad();
      scaler.scale(scaled.loss(x, y)).backward();
      scaler.unscale(scaled_opt);
      if (!scaler.found_inf()) optim::clip_grad_norm(scaled.parameters(), 0.5);
      const double before = scaler.scale_value();
      const bool stepped = scaler.step(scaled_opt);
      scaler.update();
      if (scaler.scale_value() > before) ++grown;
      if (stepped) break;
      ++skipped;
    }
  }
  EXPECT_GE(skipped, 10);  // 2^140 backs off past float's range (2^128) and more
  EXPECT_GE(grown, 1);
  const StateDict a = plain.state_dict(), b = scaled.state_dict();
  for (const auto& [name, t] : a) EXPECT_TRUE(same_bytes(t, b.at(name))) << name;
}
