#pragma once
// Offsets of N operands (an output and its inputs) at one linear index of the output's
// shape: each operand has its own element strides, 0 on the dimensions it is broadcast
// along. What a CUDA thread computes for its element; the CPU tests check it directly.
#include <stdint.h>

#include "strata_kernels/common/macros.h"

namespace strata_kernels {

constexpr int kMaxDims = 8;

template <int N>
struct StridedIndex {
  int32_t ndim;
  int64_t sizes[kMaxDims];
  int64_t strides[N][kMaxDims];

  // off[k] = sum over dimensions of (the coordinate of `linear`) * strides[k][d], the last
  // dimension fastest (row-major).
  STRATA_HD void offsets(int64_t linear, int64_t (&off)[N]) const {
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t size = sizes[d];
      const int64_t i = linear % size;
      linear /= size;
      for (int k = 0; k < N; ++k) off[k] += i * strides[k][d];
    }
  }
};

}  // namespace strata_kernels
