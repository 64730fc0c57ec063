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

TEST(LinearInit, GPTParametersAreDrawnFromTheirNames) {
  GPTConfig config{.vocab_size = 11, .context = 8, .n_layer = 2, .n_head = 2, .n_embd = 8, .seed = 9};
  GPT model(config);
  // Each parameter is drawn from (config.seed, its full name), element by element.
  Tensor expected = zeros({3 * config.n_embd, config.n_embd});
  fill_init(expected, {.kind = ParamInit::Kind::Normal, .scale = 0.02},
            named_stream(config.seed, "h.1.attn.c_attn.weight"));
  EXPECT_EQ(max_abs_diff(model.block(1).attn->c_attn->weight, expected), 0.0);
  EXPECT_EQ(model.block(1).attn->c_attn->bias.to_vector<double>(), std::vector<double>(24, 0.0));
  // So a part holding block 1 only (a pipeline stage) holds what the whole model does, and
  // another seed or another name gives other values.
  GPT stage(config, nullptr, {.embedding = false, .blocks = std::vector<int64_t>{1}, .head = false});
  for (const auto& [name, t] : stage.named_parameters())
    EXPECT_EQ(max_abs_diff(t, model.state_dict().at(name)), 0.0) << name;
  EXPECT_GT(max_abs_diff(model.block(0).attn->c_attn->weight, expected), 0.0);
  config.seed = 10;
  EXPECT_GT(max_abs_diff(GPT(config).block(1).attn->c_attn->weight, expected), 0.0);
}
