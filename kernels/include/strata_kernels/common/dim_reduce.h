#pragma once
// The sum over the middle axis of a contiguous [outer, n, inner] array (the reduced
// dimensions merged into n) in one fixed order, so that the CPU (src/backend/cpu/reduce.cpp)
// and the CUDA kernels (cuda/reduce.cu) give the same bits whatever the thread count, the
// launch shape or the layout the caller chose:
//   1. lane t (t < kDimReduceLanes) adds reduced elements t, t + L, t + 2L, ... in that
//      order to an accumulator starting at +0;
//   2. the lanes halve pairwise: for s = L/2, L/4, ..., 1, lane t < s = lane t + lane t+s;
//   3. lane 0, converted to T, is the result.
// Floating types accumulate in double (float32 too, as the CPU sum always has), integers in
// their own type. An empty lane holds +0, and a lane that started at +0 is never -0, so
// adding an empty lane is exact: a caller may skip lanes t >= n.
#include <stdint.h>

#include "strata_kernels/common/macros.h"
#include "strata_kernels/common/row_reduce.h"

namespace strata_kernels {

// The row ops' lanes (row_reduce.h): one order for every sum along a dimension; one warp on
// the GPU (the tree is then the warp's shuffle tree).
constexpr int kDimReduceLanes = kRowLanes;

template <class T>
struct DimReduceAcc {
  using type = T;
};
template <>
struct DimReduceAcc<float> {
  using type = double;
};

// Step 1 for one lane: elements t, t + L, ... of the strided sequence p[k * stride].
template <class T, class Acc>
STRATA_HD Acc dim_reduce_lane(const T* p, int64_t n, int64_t stride, int t) {
  Acc acc = Acc(0);
  for (int64_t k = t; k < n; k += kDimReduceLanes) acc += static_cast<Acc>(p[k * stride]);
  return acc;
}

// Lane t's value once the halving has come down to width s (t < s): a leaf at s == L,
// else its own and lane t+s's values at width 2s. Unrolled at compile time, so one thread
// replays the whole order with log2(L) partials live (no lane array, no local memory).
template <int S>
struct DimReduceTree {
  template <class T, class Acc>
  STRATA_HD static Acc at(const T* p, int64_t n, int64_t stride, int t) {
    const Acc a = DimReduceTree<2 * S>::template at<T, Acc>(p, n, stride, t);
    const Acc b = DimReduceTree<2 * S>::template at<T, Acc>(p, n, stride, t + S);
    return a + b;
  }
};
template <>
struct DimReduceTree<kDimReduceLanes> {
  template <class T, class Acc>
  STRATA_HD static Acc at(const T* p, int64_t n, int64_t stride, int t) {
    return dim_reduce_lane<T, Acc>(p, n, stride, t);
  }
};

// The whole order for the n elements p[0], p[stride], ..., p[(n-1) * stride], by one thread.
template <class T>
STRATA_HD typename DimReduceAcc<T>::type dim_reduce_serial(const T* p, int64_t n, int64_t stride) {
  return DimReduceTree<1>::template at<T, typename DimReduceAcc<T>::type>(p, n, stride, 0);
}

}  // namespace strata_kernels
