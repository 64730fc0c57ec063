#pragma once
// Multi-tensor operations on gradients: the sum of squares behind the global gradient norm,
// the in-place scale of clipping, and loss scaling's unscale with its inf/nan check. The
// reductions follow chunk_reduce.h's order; the scale runs on the for-each executors.
#include "strata_kernels/common/macros.h"
#include "strata_kernels/common/multi_tensor.h"

namespace strata_kernels {

template <class T>
struct GradTensor {
  T* data;
  T factor;  // scale / unscale: the multiplier (1 / loss scale for unscale)
};

// True for finite x: inf - inf and nan - nan are nan, never equal to 0. No library call, so
// the same on host and device, and it vectorises.
template <class T>
STRATA_HD bool is_finite_value(T x) {
  return x - x == T(0);
}

// Sum of x^2 in double: a float's square is exact in double, so the order of the sum is the
// only rounding.
template <class T>
struct SumOfSquaresOp {
  using Acc = double;
  STRATA_HD Acc identity() const { return 0.0; }
  STRATA_HD Acc partial(const GradTensor<T>& t, int64_t i) const {
    const double x = static_cast<double>(t.data[i]);
    return x * x;
  }
  STRATA_HD Acc combine(Acc a, Acc b) const { return a + b; }
};

// g = g * factor in place; the partial is 1 where the gradient was not finite before the
// multiply (torch's _amp_foreach_non_finite_check_and_unscale_ tests the value it reads).
template <class T>
struct UnscaleCheckOp {
  using Acc = int32_t;
  STRATA_HD Acc identity() const { return 0; }
  STRATA_HD Acc partial(const GradTensor<T>& t, int64_t i) const {
    const T g = t.data[i];
    t.data[i] = g * t.factor;
    return is_finite_value(g) ? 0 : 1;
  }
  STRATA_HD Acc combine(Acc a, Acc b) const { return a | b; }
};

// g = g * factor in place (clipping), with the executors' load/apply/store phases.
template <class T>
struct ScaleOp {
  struct Values {
    T g;
  };
  STRATA_HD Values load(const GradTensor<T>& t, int64_t i) const { return {t.data[i]}; }
  STRATA_HD void apply(const GradTensor<T>& t, Values& x) const { x.g = x.g * t.factor; }
  STRATA_HD void store(const GradTensor<T>& t, int64_t i, const Values& x) const { t.data[i] = x.g; }
  STRATA_HD void operator()(const GradTensor<T>& t, int64_t i) const { t.data[i] = t.data[i] * t.factor; }
  STRATA_HD bool vec4_ok(const GradTensor<T>& t) const { return is_vec4_aligned(t.data); }
  STRATA_HD void load4(const GradTensor<T>& t, int64_t i, Values (&x)[4]) const {
    const Vec4<T> g = load_vec4(t.data, i);
    for (int k = 0; k < 4; ++k) x[k].g = g.v[k];
  }
  STRATA_HD void store4(const GradTensor<T>& t, int64_t i, const Values (&x)[4]) const {
    Vec4<T> g;
    for (int k = 0; k < 4; ++k) g.v[k] = x[k].g;
    store_vec4(t.data, i, g);
  }
};

}  // namespace strata_kernels
