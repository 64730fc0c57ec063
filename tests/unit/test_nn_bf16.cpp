// bfloat16 parameters in nn/GPT: stored (with their gradients) in bf16, cast to float32 at
// use; and the autograd accumulation of 16-bit gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "strata/nn/gpt.h"
#include "strata/strata.h"

using namespace strata;
using namespace strata::nn;

namespace {

GPTConfig config_with(std::optional<DType> param_dtype) {
  return GPTConfig{.vocab_size = 13, .context = 8, .n_layer = 2, .n_head = 2, .n_embd = 16, .dropout = 0.0,
                   .seed = 11, .dtype = DType::Float32, .param_dtype = param_dtype};
}

struct Data {
  Tensor tokens, targets;
};
Data data_for(const GPTConfig& c) {
  Generator g(3);
  return {randint(0, c.vocab_size, {3, c.context}, {.dtype = DType::Int64}, &g),
          randint(0, c.vocab_size, {3, c.context}, {.dtype = DType::Int64}, &g)};
}

// A float32 GPT whose weights are the bf16 model's, exactly (bf16 -> f32 is exact).
void load_rounded(GPT& fp32, const GPT& bf16) {
  StateDict state;
  for (auto& [name, p] : bf16.named_parameters()) state[name] = p.detach().to(DType::Float32);
  fp32.load_state_dict(state);
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  auto x = a.to_vector<double>();
  auto y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i)
    if (!(x[i] == y[i])) return false;
  return true;
}

double relative_l2(const Tensor& a, const Tensor& b) {
  auto x = a.to_vector<double>();
  auto y = b.to_vector<double>();
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += (x[i] - y[i]) * (x[i] - y[i]);
    den += y[i] * y[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace

TEST(Bf16GPT, ParametersAreTheFloat32InitialisationRounded) {
  GPT fp32(config_with(std::nullopt));
  GPT bf16(config_with(DType::BFloat16));
  auto a = fp32.named_parameters();
  auto b = bf16.named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(b[i].second.dtype(), DType::BFloat16) << b[i].first;
    EXPECT_TRUE(b[i].second.requires_grad()) << b[i].first;
    EXPECT_TRUE(bitwise_equal(b[i].second, a[i].second.detach().to(DType::BFloat16))) << b[i].first;
  }
  EXPECT_EQ(bf16.num_parameters(), fp32.num_parameters());
}

// The bf16 model computes in float32 on its weights converted exactly, so its loss is the
// float32 model's on the rounded weights: same ops on the same values, hence bitwise (the
// stated tolerance is 0). Against the unrounded float32 model it differs by the rounding.
TEST(Bf16GPT, LossEqualsTheFloat32ModelOnRoundedWeights) {
  GPT bf16(config_with(DType::BFloat16));
  GPT rounded(config_with(std::nullopt));
  load_rounded(rounded, bf16);
  GPT unrounded(config_with(std::nullopt));
  Data d = data_for(bf16.config());
  Tensor lb = bf16.loss(d.tokens, d.targets);
  Tensor lr = rounded.loss(d.tokens, d.targets);
  Tensor lu = unrounded.loss(d.tokens, d.targets);
  EXPECT_EQ(lb.dtype(), DType::Float32);
  EXPECT_EQ(lb.item(), lr.item());
  EXPECT_NE(lb.item(), lu.item());  // the weights did change by rounding
  EXPECT_NEAR(lb.item(), lu.item(), 1e-2 * std::abs(lu.item()));
  // Logits are float32 too, and evaluation without autograd works.
  NoGradGuard no_grad;
  EXPECT_EQ(bf16.forward(d.tokens).dtype(), DType::Float32);
}

// Each gradient reaches its bf16 parameter in bf16: the float32 gradient of the rounded-weight
// model, rounded once. wte (embedding + tied head) sums two bf16 contributions, one more
// rounding: within 2^-8 relative.
TEST(Bf16GPT, GradientsReachBf16ParametersInBf16) {
  GPT bf16(config_with(DType::BFloat16));
  GPT rounded(config_with(std::nullopt));
  load_rounded(rounded, bf16);
  Data d = data_for(bf16.config());
  bf16.loss(d.tokens, d.targets).backward();
  rounded.loss(d.tokens, d.targets).backward();
  auto a = bf16.named_parameters();
  auto b = rounded.named_parameters();
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string& name = a[i].first;
    const Tensor& g = a[i].second.grad();
    ASSERT_TRUE(g.defined()) << name;
    EXPECT_EQ(g.dtype(), DType::BFloat16) << name;
    EXPECT_EQ(g.shape(), a[i].second.shape()) << name;
    const Tensor expected = b[i].second.grad().to(DType::BFloat16);
    if (name == "wte.weight") {
      EXPECT_LE(relative_l2(g, b[i].second.grad()), std::ldexp(1.0, -8)) << name;
    } else {
      EXPECT_TRUE(bitwise_equal(g, expected)) << name;
    }
  }
}

TEST(Bf16GPT, Float16ParametersWorkTheSameWay) {
  GPT f16(config_with(DType::Float16));
  Data d = data_for(f16.config());
  f16.loss(d.tokens, d.targets).backward();
  for (auto& [name, p] : f16.named_parameters()) {
    EXPECT_EQ(p.dtype(), DType::Float16) << name;
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_EQ(p.grad().dtype(), DType::Float16) << name;
  }
}

TEST(Bf16GPT, StateDictRoundTripsInBf16) {
  GPT a(config_with(DType::BFloat16));
  GPTConfig other = config_with(DType::BFloat16);
  other.seed = 12;
  GPT b(other);
  b.load_state_dict(a.state_dict());
  for (auto& [name, t] : b.state_dict()) EXPECT_TRUE(bitwise_equal(t, a.state_dict().at(name))) << name;
  // A float32 state dict does not fit a bf16 model (dtypes must match).
  GPT fp32(config_with(std::nullopt));
  EXPECT_THROW(b.load_state_dict(fp32.state_dict()), Error);
}

TEST(Bf16GPT, RejectsUnsupportedDtypeCombinations) {
  GPTConfig c = config_with(DType::BFloat16);
  c.dtype = DType::Float64;
  try {
    GPT g(c);
    FAIL() << "bf16 parameters with float64 activations were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("param_dtype"), std::string::npos) << e.what();
  }
  GPTConfig i = config_with(std::nullopt);
  i.param_dtype = DType::Int32;
  EXPECT_THROW(GPT{i}, Error);
  GPTConfig h = config_with(std::nullopt);
  h.dtype = DType::BFloat16;  // compute dtype must be float32/float64
  EXPECT_THROW(GPT{h}, Error);
}

// Optimizers update float32/float64 parameters only; the error points to the supported path.
TEST(Bf16GPT, OptimizersRefuseBf16ParametersNamingZero) {
  GPT bf16(config_with(DType::BFloat16));
  try {
    optim::AdamW opt(bf16.parameters(), {});
    FAIL() << "AdamW accepted bf16 parameters";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("bfloat16"), std::string::npos) << msg;
    EXPECT_NE(msg.find("ZeroOptimizer"), std::string::npos) << msg;
  }
}

// A bf16 leaf cast to float32 at use: gradients accumulate across backward passes (AccumulateGrad)
// and across uses in one pass (the engine's sum), in float32 rounded once to bf16 per addition.
TEST(Bf16Accumulate, ExactForRepresentableSums) {
  Tensor p = zeros({4}, {.dtype = DType::BFloat16});
  p.set_requires_grad(true);
  Tensor c = from_vector(std::vector<float>{1.5f, -0.25f, 3.0f, 0.125f}, {4});
  auto use = [&] { return sum(mul(p.to(DType::Float32), c)); };
  use().backward();
  ASSERT_EQ(p.grad().dtype(), DType::BFloat16);
  EXPECT_EQ(p.grad().to_vector<float>(), (std::vector<float>{1.5f, -0.25f, 3.0f, 0.125f}));
  use().backward();  // AccumulateGrad adds into the existing bf16 gradient
  EXPECT_EQ(p.grad().to_vector<float>(), (std::vector<float>{3.0f, -0.5f, 6.0f, 0.25f}));
  use().backward();
  EXPECT_EQ(p.grad().to_vector<float>(), (std::vector<float>{4.5f, -0.75f, 9.0f, 0.375f}));
  EXPECT_EQ(p.grad().dtype(), DType::BFloat16);

  // Two uses in one graph: the engine sums the two bf16 gradients before AccumulateGrad.
  Tensor q = zeros({4}, {.dtype = DType::BFloat16});
  q.set_requires_grad(true);
  Tensor d = from_vector(std::vector<float>{0.5f, 0.75f, -3.0f, 0.375f}, {4});
  add(sum(mul(q.to(DType::Float32), c)), sum(mul(q.to(DType::Float32), d))).backward();
  EXPECT_EQ(q.grad().dtype(), DType::BFloat16);
  EXPECT_EQ(q.grad().to_vector<float>(), (std::vector<float>{2.0f, 0.5f, 0.0f, 0.5f}));
}

// A sum that bf16 cannot hold rounds to the nearest value (ties to even), once.
TEST(Bf16Accumulate, RoundsTheFloat32SumOnce) {
  Tensor p = zeros({3}, {.dtype = DType::BFloat16});
  p.set_requires_grad(true);
  const float u = std::ldexp(1.0f, -8);  // half a bf16 ulp at 1
  auto use = [&](std::vector<float> w) { sum(mul(p.to(DType::Float32), from_vector(w, {3}))).backward(); };
  use({1.0f, 1.0f, 1.0f});
  use({u, 1.25f * u, 0.75f * u});  // each representable in bf16
  // 1 + u is a tie -> even (1); 1 + 1.25u rounds up to 1 + 2u; 1 + 0.75u rounds down.
  EXPECT_EQ(p.grad().to_vector<float>(), (std::vector<float>{1.0f, 1.0f + 2 * u, 1.0f}));
}

TEST(Bf16Accumulate, MismatchedGradientDtypeIsAClearError) {
  Tensor p = zeros({2}, {.dtype = DType::BFloat16});
  p.set_requires_grad(true);
  p.set_grad(zeros({2}, {.dtype = DType::BFloat16}));
  // A float32 gradient arriving at a bf16 leaf (not through .to()) cannot be mixed in.
  Tensor g = ones({2});
  EXPECT_THROW(p.backward(g), Error);
}
