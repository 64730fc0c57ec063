#pragma once
// The elementwise functors (elementwise_ops.h) on contiguous 16-bit data: each element is
// widened on load, goes through the float32 functor and is rounded once on store
// (storage16.h), so a 16-bit activation costs one pass over 16-bit memory and its values are
// the float32 op's on the widened input, rounded. The CPU loop (src/backend/cpu/unary16.cpp)
// and the CUDA kernel (cuda/unary16.cu) call these per element.
#include <stdint.h>

#include "strata_kernels/common/elementwise_ops.h"
#include "strata_kernels/common/macros.h"
#include "strata_kernels/common/storage16.h"

namespace strata_kernels {

// y[i] = op(x[i]).
template <class S, UnaryCode C>
struct Unary16 {
  const S* x;
  S* y;
  float p, q;
  STRATA_HD void operator()(int64_t i) const { store(y[i], UnaryFn<float, C>{p, q}(widen(x[i]))); }
};

// dx[i] = grad_op(g[i], saved[i]) (saved: the op's input or output, as its float32 node keeps).
template <class S, UnaryGradCode C>
struct UnaryGrad16 {
  const S* g;
  const S* saved;
  S* dx;
  float p, q;
  STRATA_HD void operator()(int64_t i) const {
    store(dx[i], UnaryGradFn<float, C>{p, q}(widen(g[i]), widen(saved[i])));
  }
};

}  // namespace strata_kernels
