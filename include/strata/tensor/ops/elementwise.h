#pragma once
// Elementwise arithmetic with NumPy broadcasting. Differentiable.
#include "strata/tensor/tensor.h"

namespace strata {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor neg(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor pow(const Tensor& a, double exponent);

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

// In place, not recorded by autograd (optimizer math): self += alpha * other (other is
// broadcast to self's shape), self *= value.
Tensor& add_(Tensor& self, const Tensor& other, double alpha = 1.0);
Tensor& mul_(Tensor& self, double value);

// True when every element of a and b (same shape) satisfies |a-b| <= atol + rtol*|b|.
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);
// max |a - b| over all elements, as double.
double max_abs_diff(const Tensor& a, const Tensor& b);

}  // namespace strata
