// Linear's initialisation schemes: PyTorch's kaiming-uniform (the default) and GPT-2's
// normal(0, std), which nn::GPT keeps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "strata/strata.h"

using namespace strata;
using namespace strata::nn;

namespace {
double stddev(const std::vector<double>& v) {
  double mean = 0, sq = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  for (double x : v) sq += (x - mean) * (x - mean);
  return std::sqrt(sq / static_cast<double>(v.size()));
}
}  // namespace

TEST(LinearInit, DefaultIsKaimingUniformWithBoundOneOverSqrtIn) {
  Generator gen(3);
  Linear lin(64, 256, true, {.gen = &gen});
  const double bound = 1.0 / 8.0;
  for (const Tensor& t : {lin.weight, lin.bias}) {
    std::vector<double> v = t.to_vector<double>();
    auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    EXPECT_GE(*lo, -bound);
    EXPECT_LT(*hi, bound);
    EXPECT_LT(*lo, -0.9 * bound);  // the whole range is used
    EXPECT_GT(*hi, 0.9 * bound);
  }
  // uniform(-b, b) has standard deviation b / sqrt(3); 16384 draws pin it within 3%.
  EXPECT_NEAR(stddev(lin.weight.to_vector<double>()), bound / std::sqrt(3.0), 0.03 * bound / std::sqrt(3.0));
}

TEST(LinearInit, NormalIsGPT2sWithZeroBias) {
  Generator gen(4);
  Linear lin(64, 256, true, {.gen = &gen, .linear_init = LinearInit::Normal});
  EXPECT_NEAR(stddev(lin.weight.to_vector<double>()), 0.02, 0.02 * 0.03);
  EXPECT_EQ(lin.bias.to_vector<double>(), std::vector<double>(256, 0.0));
  Generator gen2(4);
  Linear wide(64, 256, true, {.std = 0.5, .gen = &gen2, .linear_init = LinearInit::Normal});
  EXPECT_NEAR(stddev(wide.weight.to_vector<double>()), 0.5, 0.5 * 0.03);
}

TEST(LinearInit, SixteenBitIsTheFloat32LayerRounded) {
  Generator g32(5), g16(5);
  Linear a(8, 4, true, {.gen = &g32});
  Linear b(8, 4, true, {.dtype = DType::BFloat16, .gen = &g16});
  EXPECT_EQ(b.weight.dtype(), DType::BFloat16);
  EXPECT_EQ(max_abs_diff(b.weight.to(DType::Float32), a.weight.to(DType::BFloat16).to(DType::Float32)), 0.0);
  EXPECT_EQ(max_abs_diff(b.bias.to(DType::Float32), a.bias.to(DType::BFloat16).to(DType::Float32)), 0.0);
}

TEST(LinearInit, GPTLinearsAreNormalDrawnInOrder) {
  GPTConfig config{.vocab_size = 11, .context = 8, .n_layer = 2, .n_head = 2, .n_embd = 8, .seed = 9};
  GPT model(config);
  // GPT draws wte, wpe, then block 0's c_attn from one generator seeded with config.seed.
  Generator gen(config.seed);
  Embedding wte(config.vocab_size, config.n_embd, {.gen = &gen});
  Embedding wpe(config.context, config.n_embd, {.gen = &gen});
  Linear c_attn(config.n_embd, 3 * config.n_embd, true, {.gen = &gen, .linear_init = LinearInit::Normal});
  EXPECT_EQ(max_abs_diff(model.h->operator[](0).attn->c_attn->weight, c_attn.weight), 0.0);
  EXPECT_EQ(model.h->operator[](0).attn->c_attn->bias.to_vector<double>(), std::vector<double>(24, 0.0));
}
