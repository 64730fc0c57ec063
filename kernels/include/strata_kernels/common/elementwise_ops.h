#pragma once
// The elementwise ops as functors, one per op code: the CPU loops (src/backend/cpu/
// elementwise.cpp, elementwise_grad.cpp) and the CUDA kernels (cuda/elementwise.cu) both
// instantiate these, so the arithmetic is the same code. exp, log, tanh and pow call the
// platform's library (glibc on the CPU, CUDA's device math on the GPU), which may differ by a
// few ulps (tests/gpu bounds them); everything else rounds identically (IEEE +, -, *, /,
// sqrt, no contraction).
#include <math.h>
#include <stdint.h>

#include "strata_kernels/common/activation.h"
#include "strata_kernels/common/elementwise.h"
#include "strata_kernels/common/macros.h"

namespace strata_kernels {

// p and q are the op's scalars: Pow's exponent, AddScalar's and MulScalar's operand, Clamp's
// bounds.
enum class UnaryCode : int32_t {
  Neg,
  Abs,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Tanh,
  Sigmoid,
  Silu,
  Pow,
  AddScalar,
  MulScalar,
  Clamp,
  Gelu,
  Relu
};
enum class BinaryCode : int32_t { Add, Sub, Mul, Div, Minimum, Maximum, Pow };
// grad * d op(x) / dx, from `saved`: the op's output for Exp, Sqrt, Rsqrt, Tanh, Sigmoid and
// Relu, its input otherwise.
enum class UnaryGradCode : int32_t { Abs, Exp, Log, Sqrt, Rsqrt, Tanh, Sigmoid, Silu, Clamp, Pow, Gelu, Relu };
// grad * d op(a, b) / da (the A and Base forms) or / db (B, Exponent).
enum class BinaryGradCode : int32_t { MinimumA, MinimumB, MaximumA, MaximumB, PowBase, PowExponent };

template <auto>
inline constexpr bool kAlwaysFalse = false;

// Whether an op has a meaning on integer types (the others are floating-point only).
STRATA_HD constexpr bool is_arithmetic(UnaryCode c) {
  return c == UnaryCode::Neg || c == UnaryCode::Abs || c == UnaryCode::AddScalar || c == UnaryCode::MulScalar ||
         c == UnaryCode::Clamp;
}
STRATA_HD constexpr bool is_arithmetic(BinaryCode c) { return c != BinaryCode::Pow; }

template <class T, UnaryCode C>
struct UnaryFn {
  T p, q;
  STRATA_HD T operator()(T x) const {
    if constexpr (C == UnaryCode::Neg) return -x;
    else if constexpr (C == UnaryCode::Abs) return abs_value(x);
    else if constexpr (C == UnaryCode::AddScalar) return x + p;
    else if constexpr (C == UnaryCode::MulScalar) return x * p;
    else if constexpr (C == UnaryCode::Clamp) return clamp_value(x, p, q);
    else if constexpr (C == UnaryCode::Exp) return static_cast<T>(exp(x));
    else if constexpr (C == UnaryCode::Log) return static_cast<T>(log(x));
    else if constexpr (C == UnaryCode::Sqrt) return static_cast<T>(sqrt(x));
    else if constexpr (C == UnaryCode::Rsqrt) return rsqrt_value(x);
    else if constexpr (C == UnaryCode::Tanh) return static_cast<T>(tanh(x));
    else if constexpr (C == UnaryCode::Sigmoid) return sigmoid(x);
    else if constexpr (C == UnaryCode::Silu) return silu(x);
    else if constexpr (C == UnaryCode::Pow) return static_cast<T>(pow(x, p));
    else if constexpr (C == UnaryCode::Gelu) return gelu_tanh(x);
    else if constexpr (C == UnaryCode::Relu) return x < T(0) ? T(0) : x;  // NaN passes, as in torch
    else static_assert(kAlwaysFalse<C>, "unknown op code");
  }
};

template <class T, BinaryCode C>
struct BinaryFn {
  STRATA_HD T operator()(T a, T b) const {
    if constexpr (C == BinaryCode::Add) return a + b;
    else if constexpr (C == BinaryCode::Sub) return a - b;
    else if constexpr (C == BinaryCode::Mul) return a * b;
    else if constexpr (C == BinaryCode::Div) return a / b;
    else if constexpr (C == BinaryCode::Minimum) return minimum_value(a, b);
    else if constexpr (C == BinaryCode::Maximum) return maximum_value(a, b);
    else if constexpr (C == BinaryCode::Pow) return static_cast<T>(pow(a, b));
    else static_assert(kAlwaysFalse<C>, "unknown op code");
  }
};

template <class T, UnaryGradCode C>
struct UnaryGradFn {
  T p, q;
  STRATA_HD T operator()(T g, T s) const {
    if constexpr (C == UnaryGradCode::Abs) return g * abs_grad(s);
    else if constexpr (C == UnaryGradCode::Exp) return g * s;
    else if constexpr (C == UnaryGradCode::Log) return g / s;
    else if constexpr (C == UnaryGradCode::Sqrt) return g * sqrt_grad_from_output(s);
    else if constexpr (C == UnaryGradCode::Tanh) return g * tanh_grad_from_output(s);
    else if constexpr (C == UnaryGradCode::Sigmoid) return g * sigmoid_grad_from_output(s);
    else if constexpr (C == UnaryGradCode::Silu) return g * silu_grad(s);
    else if constexpr (C == UnaryGradCode::Rsqrt) return g * rsqrt_grad_from_output(s);
    else if constexpr (C == UnaryGradCode::Clamp) return g * clamp_grad(s, p, q);
    else if constexpr (C == UnaryGradCode::Pow) return g * pow_grad_base(s, p);
    else if constexpr (C == UnaryGradCode::Gelu) return g * gelu_tanh_grad(s);
    else if constexpr (C == UnaryGradCode::Relu) return s > T(0) ? g : T(0);
    else static_assert(kAlwaysFalse<C>, "unknown op code");
  }
};

template <class T, BinaryGradCode C>
struct BinaryGradFn {
  STRATA_HD T operator()(T g, T a, T b) const {
    if constexpr (C == BinaryGradCode::MinimumA) return g * minimum_share(a, b);
    else if constexpr (C == BinaryGradCode::MinimumB) return g * minimum_share(b, a);
    else if constexpr (C == BinaryGradCode::MaximumA) return g * minimum_share(b, a);
    else if constexpr (C == BinaryGradCode::MaximumB) return g * minimum_share(a, b);
    else if constexpr (C == BinaryGradCode::PowBase) return g * pow_grad_base(a, b);
    else if constexpr (C == BinaryGradCode::PowExponent) return g * pow_grad_exponent(a, b);
    else static_assert(kAlwaysFalse<C>, "unknown op code");
  }
};

}  // namespace strata_kernels
