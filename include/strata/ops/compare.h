#pragma once
// Comparisons to Bool tensors, and selection by a Bool condition, with NumPy broadcasting.
//
// Comparisons take two tensors of one dtype (float32, float64, int32, int64 or bool), are
// not differentiable and return a Bool tensor of the broadcast shape. The scalar forms
// convert `b` to a's dtype first. Shapes that do not broadcast throw an error naming the op
// and the shapes.
#include "strata/tensor/tensor.h"

namespace strata {

Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);

// Bool tensors of a's shape: true where a is NaN, +-inf, neither (finite). float32,
// float64, int32, int64 or bool (integers and bools are always finite, as in torch). Not
// differentiable.
Tensor isnan(const Tensor& a);
Tensor isinf(const Tensor& a);
Tensor isfinite(const Tensor& a);

// Operator forms (libtorch's): Bool tensors, never a test of identity (Tensor::is_same).
inline Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
inline Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
inline Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
inline Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
inline Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
inline Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
inline Tensor operator==(const Tensor& a, double b) { return eq(a, b); }
inline Tensor operator!=(const Tensor& a, double b) { return ne(a, b); }
inline Tensor operator<(const Tensor& a, double b) { return lt(a, b); }
inline Tensor operator<=(const Tensor& a, double b) { return le(a, b); }
inline Tensor operator>(const Tensor& a, double b) { return gt(a, b); }
inline Tensor operator>=(const Tensor& a, double b) { return ge(a, b); }
// Scalar on the left: `0.5 < x` is `x > 0.5`.
inline Tensor operator==(double a, const Tensor& b) { return eq(b, a); }
inline Tensor operator!=(double a, const Tensor& b) { return ne(b, a); }
inline Tensor operator<(double a, const Tensor& b) { return gt(b, a); }
inline Tensor operator<=(double a, const Tensor& b) { return ge(b, a); }
inline Tensor operator>(double a, const Tensor& b) { return lt(b, a); }
inline Tensor operator>=(double a, const Tensor& b) { return le(b, a); }

// cond ? a : b elementwise; cond is Bool, a and b share a dtype; all three broadcast.
// Differentiable in a (gradient where cond) and b (where !cond).
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// value where mask, else x; mask is Bool and broadcasts with x. Differentiable in x (zero
// gradient where masked).
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

}  // namespace strata
