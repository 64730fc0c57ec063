#pragma once
// tril/triu's mask and one_hot's element, shared by the CPU loops
// (src/backend/cpu/triangle.cpp, one_hot.cpp) and the CUDA kernels (cuda/triangle.cu,
// cuda/one_hot.cu). Both copy or compare values, never compute with them, so the CPU and the
// GPU agree bit for bit (NaN payloads and -0.0 kept, as torch keeps them).
#include <stdint.h>

#include "strata_kernels/common/macros.h"

namespace strata_kernels {

// Whether tril (lower) or triu keeps element (row, col) of a matrix: tril keeps
// col - row <= diagonal, triu col - row >= diagonal (diagonal 0 is the main diagonal,
// positive above it, negative below), as torch.
STRATA_HD bool triangle_keeps(int64_t row, int64_t col, int64_t diagonal, bool lower) {
  return lower ? col - row <= diagonal : col - row >= diagonal;
}

// Element i of tril/triu of a contiguous [batch, rows, cols] array whose elements are
// copied as T (an unsigned type of the element's size: zero bits are 0, +0.0 and false for
// every dtype).
template <class T>
STRATA_HD T triangle_element(const T* in, int64_t i, int64_t rows, int64_t cols, int64_t diagonal, bool lower) {
  const int64_t col = i % cols, row = (i / cols) % rows;
  return triangle_keeps(row, col, diagonal, lower) ? in[i] : T(0);
}

// Element i of one_hot's [n, classes] output for int64 class indices (already checked to
// lie in [0, classes)).
STRATA_HD int64_t one_hot_element(const int64_t* index, int64_t i, int64_t classes) {
  return index[i / classes] == i % classes ? 1 : 0;
}

}  // namespace strata_kernels
