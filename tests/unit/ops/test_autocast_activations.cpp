// autocast with 16-bit activations (autocast::Options::activations, strata/ops/autocast.h):
// each op that takes and gives 16-bit computes in float32 inside and rounds its output once,
// so it equals the float32 op on the same (16-bit) inputs rounded once, bit for bit, and
// lies within bfloat16's unit roundoff u = 2^-8 of it; gradients likewise. A GPT and a Llama
// step stay near the float32 step, and the conversions an autocast GPT step runs are counted.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "strata/strata.h"
#include "test_util.h"

namespace strata {
namespace {

constexpr DType kBf16 = DType::BFloat16;
constexpr double kU = 0x1p-8;  // bfloat16's unit roundoff (8 significant bits, round to nearest even)

Tensor wide(const Tensor& t) { return t.to(DType::Float32); }

void expect_same_bits(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  ASSERT_EQ(wide(a).to_vector<float>(), wide(b).to_vector<float>()) << what;
}

// One rounding of a float32 value y to bfloat16 errs by at most u |y| (round to nearest;
// no value here is near bfloat16's underflow): |op16 - op32| <= u |op32| elementwise.
void expect_within_one_rounding(const Tensor& got16, const Tensor& want32, const std::string& what) {
  const std::vector<double> g = got16.to_vector<double>(), w = want32.to_vector<double>();
  ASSERT_EQ(g.size(), w.size());
  for (size_t i = 0; i < g.size(); ++i) ASSERT_LE(std::abs(g[i] - w[i]), kU * std::abs(w[i])) << what << " " << i;
}

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
};

// For a 16-bit x: op(x) is bfloat16, equals op(float32(x)) rounded once (bit for bit), is
// within one rounding of it, and its gradient is the float32 op's gradient of the widened
// x and output gradient, rounded once.
void check_unary(const UnaryCase& c, const Tensor& x32, const Tensor& g32) {
  SCOPED_TRACE(c.name);
  const Tensor x16 = x32.to(kBf16).set_requires_grad(true), g16 = g32.to(kBf16);
  const Tensor xw = wide(x16.detach()).set_requires_grad(true);
  const Tensor out16 = c.op(x16), out32 = c.op(xw);
  EXPECT_EQ(out16.dtype(), kBf16);
  expect_same_bits(out16, out32.detach().to(kBf16), "output");
  expect_within_one_rounding(out16, out32.detach(), "output");
  out16.backward(g16);
  out32.backward(wide(g16));
  EXPECT_EQ(x16.grad().dtype(), kBf16);
  expect_same_bits(x16.grad(), xw.grad().to(kBf16), "gradient");
  expect_within_one_rounding(x16.grad(), xw.grad(), "gradient");
}

TEST(AutocastActivations, UnaryOpsComputeInFloat32AndRoundOnce) {
  Generator gen(21);
  const Tensor x = randn({6, 40}, {}, &gen), g = randn({6, 40}, {}, &gen);
  const std::vector<UnaryCase> cases = {
      {"gelu", [](const Tensor& t) { return gelu(t); }},
      {"silu", [](const Tensor& t) { return silu(t); }},
      {"softmax", [](const Tensor& t) { return softmax(t, -1); }},
      {"log_softmax", [](const Tensor& t) { return log_softmax(t, -1); }},
      {"add", [](const Tensor& t) { return add(t, t); }},
      {"mul", [](const Tensor& t) { return mul(t, t); }},
  };
  for (const UnaryCase& c : cases) check_unary(c, x, g);
}

// Norms: 16-bit input, float32 statistics and math, 16-bit output; the float32 weight and
// bias get the float32 op's gradients exactly (no rounding reaches them).
TEST(AutocastActivations, NormsTakeAndGive16BitWithFloat32Parameters) {
  Generator gen(22);
  const Tensor x = add(mul(randn({5, 48}, {}, &gen), 3.0), 1.5), g = randn({5, 48}, {}, &gen);
  const Tensor w = add(randn({48}, {}, &gen), 1.0), b = randn({48}, {}, &gen);
  for (const bool rms : {false, true}) {
    SCOPED_TRACE(rms ? "rms_norm" : "layer_norm");
    // One set of parameters per run, with the same values.
    auto params = [&] {
      return std::vector<Tensor>{w.clone().set_requires_grad(true), b.clone().set_requires_grad(true)};
    };
    auto run = [rms](const Tensor& in, const std::vector<Tensor>& p) {
      return rms ? rms_norm(in, p[0], 1e-5) : layer_norm(in, p[0], p[1], 1e-5);
    };
    const std::vector<Tensor> p16 = params(), p32 = params();
    const Tensor x16 = x.to(kBf16).set_requires_grad(true), xw = wide(x16.detach()).set_requires_grad(true);
    const Tensor out16 = run(x16, p16), out32 = run(xw, p32);
    out16.backward(g.to(kBf16));
    out32.backward(wide(g.to(kBf16)));
    EXPECT_EQ(out16.dtype(), kBf16);
    expect_same_bits(out16, out32.detach().to(kBf16), "output");
    expect_within_one_rounding(out16, out32.detach(), "output");
    expect_same_bits(x16.grad(), xw.grad().to(kBf16), "input gradient");
    for (size_t i = 0; i < (rms ? 1u : 2u); ++i) {
      EXPECT_EQ(p16[i].grad().dtype(), DType::Float32);
      expect_same_bits(p16[i].grad(), p32[i].grad(), "parameter gradient");
    }
  }
}

// Under 16-bit activations a norm of the float32 residual stream returns 16-bit; a 16-bit
// and a float32 operand add to float32 (the residual stays float32); products return 16-bit.
TEST(AutocastActivations, TheScopeSetsWhereActivationsBecome16Bit) {
  Generator gen(23);
  const Tensor x = randn({4, 16}, {}, &gen), w = randn({8, 16}, {}, &gen).set_requires_grad(true);
  nn::LayerNorm ln(16);
  autocast::Scope scope(kBf16, {.activations = true});
  const Tensor h = ln.forward(x);
  EXPECT_EQ(h.dtype(), kBf16);
  const Tensor y = linear(h, w);
  EXPECT_EQ(y.dtype(), kBf16);
  const Tensor r = add(x.narrow(1, 0, 8), y);
  EXPECT_EQ(r.dtype(), DType::Float32);
  expect_same_bits(r, add(x.narrow(1, 0, 8), wide(y)), "mixed add");
}

// Outside an autocast scope mixing dtypes stays an error naming both.
TEST(AutocastActivations, MixedDtypesOutsideAScopeStillFail) {
  const Tensor a = ones({3}), b = ones({3}).to(kBf16);
  testing::expect_error_mentions([&] { add(a, b); }, {"add", "dtype mismatch", "bfloat16", "float32"});
}

// cross_entropy of 16-bit logits: the float32 loss of the widened logits, bit for bit; the
// logits' gradient is the float32 gradient rounded once.
TEST(AutocastActivations, CrossEntropyOf16BitLogitsIsFloat32) {
  Generator gen(24);
  const Tensor logits = mul(randn({7, 33}, {}, &gen), 2.0);
  const Tensor targets = randint(0, 33, {7}, {.dtype = DType::Int64}, &gen);
  const Tensor l16 = logits.to(kBf16).set_requires_grad(true), lw = wide(l16.detach()).set_requires_grad(true);
  const Tensor loss16 = cross_entropy(l16, targets), loss32 = cross_entropy(lw, targets);
  EXPECT_EQ(loss16.dtype(), DType::Float32);
  EXPECT_EQ(loss16.item(), loss32.item());
  loss16.backward();
  loss32.backward();
  expect_same_bits(l16.grad(), lw.grad().to(kBf16), "logits gradient");
}

}  // namespace
}  // namespace strata
