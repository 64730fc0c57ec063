#pragma once
// Elementwise arithmetic with NumPy broadcasting. Differentiable (float32, float64).
//
// Binary ops take two tensors of one dtype (no implicit promotion) and broadcast their
// shapes as NumPy and PyTorch do; shapes that do not broadcast throw an error naming the op
// and both shapes. Gradients are summed back to each input's shape. add, sub, mul, div,
// minimum, maximum, neg, abs and clamp also run on int32/int64; the others need float32 or
// float64. Bool tensors have no arithmetic (comparisons and where: compare.h).
#include <optional>

#include "strata/tensor/tensor.h"

namespace strata {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
// NaN in either input gives NaN. The gradient goes to the selected input; on a tie each
// input gets half of it (as PyTorch).
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
// a^b with both gradients: d/da = b a^(b-1) (0 where b == 0), d/db = a^b log a, which is NaN
// where a < 0 (log undefined) and 0 where a == 0 and b >= 0, as PyTorch.
Tensor pow(const Tensor& a, const Tensor& exponent);
Tensor pow(double base, const Tensor& exponent);  // gradient to exponent only
Tensor pow(const Tensor& a, double exponent);     // d/da = exponent a^(exponent-1), 0 for exponent 0
Tensor add(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor neg(const Tensor& a);
Tensor abs(const Tensor& a);  // gradient sign(a), 0 at 0
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor rsqrt(const Tensor& a);  // 1 / sqrt(a)
Tensor tanh(const Tensor& a);
Tensor sigmoid(const Tensor& a);  // 1 / (1 + exp(-a)), without overflow for any a
Tensor silu(const Tensor& a);     // a * sigmoid(a)
// min(max(a, min), max) with either bound optional (at least one given); all `max` when
// min > max; NaN stays NaN. Gradient 1 where min <= a <= max (bounds included, as
// PyTorch), else 0.
Tensor clamp(const Tensor& a, std::optional<double> min, std::optional<double> max);

// Rounding to integral values, as PyTorch: round halves to even (0.5 -> 0, 1.5 -> 2,
// -0.5 -> -0), floor, ceil, trunc (toward zero); NaN and +-inf stay. sign is -1, 0 or 1,
// computed as (0 < a) - (a < 0): sign(-0.0) = +0 and, as PyTorch 1.13, sign(NaN) = 0.
// float32/float64 and int32/int64 (an integer is its own rounding); Bool is refused. The
// gradient is zero everywhere (the functions are piecewise constant), as PyTorch.
Tensor round(const Tensor& a);
Tensor floor(const Tensor& a);
Tensor ceil(const Tensor& a);
Tensor trunc(const Tensor& a);
Tensor sign(const Tensor& a);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator+(const Tensor& a, double b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, double b) { return add(a, -b); }
inline Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
inline Tensor operator*(double a, const Tensor& b) { return mul(b, a); }
inline Tensor operator/(const Tensor& a, double b) { return mul(a, 1.0 / b); }
inline Tensor operator-(const Tensor& a) { return neg(a); }
// Scalar on the left (libtorch's `1.0 - x`); differentiable in the tensor. The scalar
// becomes a 0-d tensor of the tensor's dtype and device.
inline Tensor operator+(double a, const Tensor& b) { return add(b, a); }
Tensor operator-(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);

// Compound assignment, in place: the result (broadcast must keep self's shape; same dtype)
// is written into self's memory and self.version() is bumped, so a backward that saved this
// memory refuses to run. With grad mode on and either operand requiring grad, autograd
// records the op as PyTorch's add_/sub_/mul_/div_ do (self takes the op's history); a leaf
// that requires grad is refused (update it under NoGradGuard), and so is a tensor whose
// memory another tensor shares (a view of it or of its base, or a copy saved for a
// backward), since strata cannot rewire those tensors' histories: clone() it first.
Tensor& operator+=(Tensor& self, const Tensor& other);
Tensor& operator-=(Tensor& self, const Tensor& other);
Tensor& operator*=(Tensor& self, const Tensor& other);
Tensor& operator/=(Tensor& self, const Tensor& other);
Tensor& operator+=(Tensor& self, double other);
Tensor& operator-=(Tensor& self, double other);
Tensor& operator*=(Tensor& self, double other);
Tensor& operator/=(Tensor& self, double other);

// In place, not recorded by autograd (optimizer math): self += alpha * other (other is
// broadcast to self's shape), self *= value.
Tensor& add_(Tensor& self, const Tensor& other, double alpha = 1.0);
Tensor& mul_(Tensor& self, double value);

// True when every element of a and b (same shape) satisfies |a-b| <= atol + rtol*|b|.
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);
// max |a - b| over all elements, as double.
double max_abs_diff(const Tensor& a, const Tensor& b);

}  // namespace strata
