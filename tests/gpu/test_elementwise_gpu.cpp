// The elementwise ops on a GPU against their CPU twins (label gpu): both run the functors of
// strata_kernels/common/elementwise_ops.h, so results are equal bit for bit, except the ops that
// call the platform's exp, log, tanh or pow (glibc vs CUDA's device math), which stay within
// a few ulps (bounds below). Inputs are broadcast, strided (transposed views) and, once,
// above 2^24 elements; the output's memory is poisoned with NaN before each launch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/derived_bounds.h"
#include "gpu/gpu_test.h"
#include "ops/elementwise_common.h"
#include "strata/strata.h"

namespace strata {
namespace {

using backend::BinaryGradOp;
using backend::BinaryOp;
using backend::UnaryGradOp;
using backend::UnaryOp;

using ElementwiseGpu = testing::GpuTest;
using testing::max_ulps;
using testing::poison;

// Where the platform's library is called, the bound in ulps; elsewhere 0. Sigmoid and SiLU
// call it in float64 only (float32 runs fast_math.h's own exp on both sides).
int64_t ulp_bound(bool library_math, DType dtype) { return library_math ? (dtype == DType::Float32 ? 4 : 2) : 0; }
bool uses_library_exp(UnaryOp op, DType dtype) {
  return dtype == DType::Float64 && (op == UnaryOp::Sigmoid || op == UnaryOp::Silu);
}

Tensor positive(const Shape& shape, DType dtype, Generator* gen) {
  return add(abs(randn(shape, {.dtype = dtype}, gen)), 0.1);
}

TEST_F(ElementwiseGpu, UnaryOpsEqualTheCpu) {
  struct Case {
    UnaryOp op;
    const char* name;
    double p, q;
    bool library_math;
    bool positive_input;
  };
  const std::vector<Case> cases{{UnaryOp::Neg, "neg", 0, 0, false, false},
                                {UnaryOp::Abs, "abs", 0, 0, false, false},
                                {UnaryOp::AddScalar, "add", 0.3, 0, false, false},
                                {UnaryOp::MulScalar, "mul", -1.7, 0, false, false},
                                {UnaryOp::Clamp, "clamp", -0.5, 0.5, false, false},
                                {UnaryOp::Exp, "exp", 0, 0, true, false},
                                {UnaryOp::Log, "log", 0, 0, true, true},
                                {UnaryOp::Sqrt, "sqrt", 0, 0, false, true},
                                {UnaryOp::Rsqrt, "rsqrt", 0, 0, false, true},
                                {UnaryOp::Tanh, "tanh", 0, 0, true, false},
                                {UnaryOp::Sigmoid, "sigmoid", 0, 0, false, false},
                                {UnaryOp::Silu, "silu", 0, 0, false, false},
                                {UnaryOp::Pow, "pow", 1.5, 0, true, true}};
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Generator gen(3);
    for (const Case& c : cases) {
      const Tensor base =
          c.positive_input ? positive({37, 129}, dtype, &gen) : randn({37, 129}, {.dtype = dtype}, &gen);
      for (const Tensor& x : {base, base.transpose(0, 1)}) {  // contiguous, then strided
        poison(x.numel(), dtype);
        const Tensor got = detail::unary_op(c.op, x.to(gpu), c.name, c.p, c.q);
        const Tensor want = detail::unary_op(c.op, x, c.name, c.p, c.q);
        EXPECT_LE(max_ulps(got.to(Device::cpu()), want),
                  ulp_bound(c.library_math || uses_library_exp(c.op, dtype), dtype))
            << c.name << " " << dtype;
      }
      // Strided on the device itself: a transposed view of a device tensor.
      const Tensor dev_view = base.to(gpu).transpose(0, 1);
      const Tensor got = detail::unary_op(c.op, dev_view, c.name, c.p, c.q);
      const Tensor want = detail::unary_op(c.op, base.transpose(0, 1), c.name, c.p, c.q);
      EXPECT_LE(max_ulps(got.to(Device::cpu()), want),
                ulp_bound(c.library_math || uses_library_exp(c.op, dtype), dtype))
          << c.name << " strided " << dtype;
    }
  }
}

TEST_F(ElementwiseGpu, BinaryOpsBroadcastAndEqualTheCpu) {
  struct Case {
    BinaryOp op;
    const char* name;
    bool library_math;
  };
  const std::vector<Case> cases{{BinaryOp::Add, "add", false},         {BinaryOp::Sub, "sub", false},
                                {BinaryOp::Mul, "mul", false},         {BinaryOp::Div, "div", false},
                                {BinaryOp::Minimum, "minimum", false}, {BinaryOp::Maximum, "maximum", false},
                                {BinaryOp::Pow, "pow", true}};
  const std::vector<std::pair<Shape, Shape>> shapes{
      {{5, 7, 3}, {5, 7, 3}}, {{5, 7, 3}, {7, 1}}, {{1, 7, 1}, {5, 1, 3}}, {{4}, {}}, {{0, 3}, {3}}};
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int64}) {
    Generator gen(9);
    for (const Case& c : cases) {
      if (dtype == DType::Int64 && c.op == BinaryOp::Pow) continue;
      for (const auto& [sa, sb] : shapes) {
        Tensor a = positive(sa, DType::Float64, &gen), b = positive(sb, DType::Float64, &gen);
        if (dtype == DType::Int64) {
          a = mul(a, 10.0).to(DType::Int64);
          b = add(mul(b, 10.0), 1.0).to(DType::Int64);  // no division by 0
        } else {
          a = a.to(dtype);
          b = b.to(dtype);
        }
        const Tensor want = detail::binary_op(c.op, a, b, c.name);
        poison(want.numel(), dtype);
        const Tensor got = detail::binary_op(c.op, a.to(gpu), b.to(gpu), c.name);
        ASSERT_EQ(got.shape(), want.shape()) << c.name;
        if (dtype == DType::Int64) {
          EXPECT_EQ(got.to_vector<int64_t>(), want.to_vector<int64_t>()) << c.name << " " << sa << " " << sb;
        } else {
          EXPECT_LE(max_ulps(got.to(Device::cpu()), want), ulp_bound(c.library_math, dtype))
              << c.name << " " << dtype << " " << sa << " " << sb;
        }
      }
    }
  }
}

TEST_F(ElementwiseGpu, GradientKernelsEqualTheCpu) {
  Generator gen(5);
  const Tensor g = randn({6, 50}, {}, &gen), x = positive({6, 50}, DType::Float32, &gen), y = randn({50}, {}, &gen);
  for (UnaryGradOp op :
       {UnaryGradOp::Abs, UnaryGradOp::Exp, UnaryGradOp::Log, UnaryGradOp::Sqrt, UnaryGradOp::Rsqrt, UnaryGradOp::Tanh,
        UnaryGradOp::Sigmoid, UnaryGradOp::Silu, UnaryGradOp::Clamp, UnaryGradOp::Pow}) {
    const Tensor want = detail::unary_grad_op(op, g, x, "grad", 1.3, 2.0);
    const Tensor got = detail::unary_grad_op(op, g.to(gpu), x.to(gpu), "grad", 1.3, 2.0);
    EXPECT_LE(max_ulps(got.to(Device::cpu()), want), op == UnaryGradOp::Pow ? 4 : 0) << static_cast<int>(op);
  }
  for (BinaryGradOp op : {BinaryGradOp::MinimumA, BinaryGradOp::MinimumB, BinaryGradOp::MaximumA,
                          BinaryGradOp::MaximumB, BinaryGradOp::PowBase, BinaryGradOp::PowExponent}) {
    const Tensor want = detail::binary_grad_op(op, g, x, y, "grad");
    const Tensor got = detail::binary_grad_op(op, g.to(gpu), x.to(gpu), y.to(gpu), "grad");
    const bool library = op == BinaryGradOp::PowBase || op == BinaryGradOp::PowExponent;
    EXPECT_LE(max_ulps(got.to(Device::cpu()), want), library ? 8 : 0) << static_cast<int>(op);
  }
}

// Above 2^24 elements (32-bit indices would wrap), broadcast along the leading dimension,
// and through autograd: d(silu(a * b))/da on the device equals the CPU's.
TEST_F(ElementwiseGpu, LargeBroadcastAndAutogradEqualTheCpu) {
  Generator gen(1);
  const int64_t rows = 4097, cols = 4099;  // 16,793,603 elements > 2^24
  const Tensor a = randn({rows, cols}, {}, &gen), b = randn({cols}, {}, &gen);
  poison(rows * cols, DType::Float32);
  const Tensor got = mul(a.to(gpu), b.to(gpu));
  EXPECT_EQ(max_ulps(got.to(Device::cpu()), mul(a, b)), 0);

  Tensor ca = randn({3, 17}, {}, &gen), cb = randn({3, 17}, {}, &gen);
  Tensor ga = ca.to(gpu), gb = cb.to(gpu);
  for (Tensor* t : {&ca, &ga}) t->set_requires_grad(true);
  silu(mul(ca, cb)).backward(ones({3, 17}));
  silu(mul(ga, gb)).backward(ones({3, 17}, {.device = gpu}));
  EXPECT_EQ(max_ulps(ga.grad().to(Device::cpu()), ca.grad()), 0);
}

// GELU's bounds in float64, where each side's exp is its library's (activation.h: gelu(x) =
// x s, gelu'(x) = s + t with s = sigmoid(2v), t = 2 x v' s (1 - s), v = sqrt(2/pi) (x +
// 0.044715 x^3), computed from z = exp(-2|v|), r = 1 / (1 + z), s = r or z r, s (1 - s) = z r^2).
// Everything but z is the same bits on both sides (the same operations on the same input).
// z_gpu and z_cpu are each within library_error of exp(-2|v|), so within d = 2 library_error
// of each other, relatively. s and z r^2 change by at most d, relatively, when z does
// (d ln s / d ln z is -z / (1 + z) or 1 / (1 + z); d ln(z r^2) / d ln z = (1 - z) / (1 + z)).
// After z each side rounds again: forward 4 times (1 + z, the division, z r, x s), so
//   |gelu_gpu - gelu_cpu| <= (d + 2 gamma_4) |gelu(x)|;
// backward s 3 times, t 7 (the products by z, r, r and r's own 2 each, twice), their sum once
// and the product by g once, so relative to |s| + |t| (the sum may cancel: gelu' is 0 near
// x = -0.75, where ulps of the result are no measure):
//   |dx_gpu - dx_cpu| <= |g| (|s| + |t|) (d + 2 gamma_9).
struct GeluBounds {
  std::vector<double> forward, backward;
};
GeluBounds gelu_float64_bounds(const Tensor& x, const Tensor& g) {
  const double u = testing::unit_roundoff(DType::Float64), d = 2 * testing::library_error(u);
  const std::vector<double> xs = x.to_vector<double>(), gs = g.to_vector<double>();
  GeluBounds b;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double k = 0.79788456080286535588, c = 0.044715, xi = xs[i];
    const double v = k * (xi + c * xi * xi * xi), dv = k * (1 + 3 * c * xi * xi);
    const double s = 1 / (1 + std::exp(-2 * v)), t = 2 * xi * dv * s * (1 - s);
    b.forward.push_back((d + 2 * testing::gamma_k(4, u)) * std::abs(xi * s));
    b.backward.push_back(std::abs(gs[i]) * (s + std::abs(t)) * (d + 2 * testing::gamma_k(9, u)));
  }
  return b;
}

// Proves: gelu and relu, forward and backward through autograd, equal the CPU bit for bit in
// float32 (both run fast_exp) and relu in float64; float64 gelu stays within the bounds above.
TEST_F(ElementwiseGpu, GeluAndReluEqualTheCpu) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Generator gen(13);
    const Tensor x = mul(randn({37, 129}, {.dtype = dtype}, &gen), 5.0), g = randn({37, 129}, {.dtype = dtype}, &gen);
    const GeluBounds bound = gelu_float64_bounds(x, g);
    for (bool is_gelu : {true, false}) {
      const bool derived = is_gelu && dtype == DType::Float64;
      const std::string what = std::string(is_gelu ? "gelu " : "relu ") + std::string(dtype_name(dtype));
      Tensor xc = x.detach().set_requires_grad(true), xg = x.to(gpu).set_requires_grad(true);
      const Tensor want = is_gelu ? gelu(xc) : relu(xc);
      poison(want.numel(), dtype);
      const Tensor got = is_gelu ? gelu(xg) : relu(xg);
      if (derived) {
        EXPECT_LE(testing::worst_over_bound(got.to(Device::cpu()), want, bound.forward), 1.0) << what;
      } else {
        EXPECT_EQ(max_ulps(got.to(Device::cpu()), want), 0) << what;
      }
      want.backward(g);
      got.backward(g.to(gpu));
      if (derived) {
        EXPECT_LE(testing::worst_over_bound(xg.grad().to(Device::cpu()), xc.grad(), bound.backward), 1.0)
            << what << " backward";
      } else {
        EXPECT_EQ(max_ulps(xg.grad().to(Device::cpu()), xc.grad()), 0) << what << " backward";
      }
    }
  }
}

}  // namespace
}  // namespace strata
