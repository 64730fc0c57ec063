#pragma once
// The per-element work of index_select and index_add along one dimension of a contiguous
// array seen as [outer, n, inner] (src/backend/cpu/dim_layout.h): cuda/index_rows.cu runs
// these as grid-stride kernels (the embedding is the case outer == 1), and the CPU tests
// (tests/unit/kernels/test_index_rows.cpp) run them in a plain loop beside the CPU ops.
// I is the index type (int32_t or int64_t).
#include <stdint.h>

#include "strata_kernels/common/macros.h"

namespace strata_kernels {

// Element t = (o * m + j) * inner + c of out [outer, m, inner]: in[o, index[j], c]. An index
// outside [0, n) stores zero and sets *bad (when bad is not null).
template <class E, class I>
struct SelectRows {
  E* out;
  const E* in;
  const I* index;
  int64_t n, m, inner;
  int32_t* bad;
  STRATA_HD void operator()(int64_t t) const {
    const int64_t c = t % inner, r = t / inner, j = r % m, o = r / m;
    const auto v = static_cast<int64_t>(index[j]);
    if (v < 0 || v >= n) {
      if (bad != nullptr) *bad = 1;
      out[t] = E(0);
      return;
    }
    out[t] = in[(o * n + v) * inner + c];
  }
};

// out[o, index[j], c] += src[o, j, c] for every j, after a stable sort of the (index[j], j)
// pairs: keys[q] is the q-th smallest index and positions[q] its j (increasing among equal
// keys). Element t = (o * m + q) * inner + c works only where q starts a run of equal keys:
// it adds the run's sources to the destination's current value in increasing j, the order
// of the CPU loop over j, so the same bits with no atomics (one writer per destination).
// A key outside [0, n) is skipped and sets *bad (when bad is not null).
template <class T, class I>
struct SumRuns {
  T* out;
  const T* src;
  const I* keys;
  const int64_t* positions;
  int64_t n, m, inner;
  int32_t* bad;
  STRATA_HD void operator()(int64_t t) const {
    const int64_t c = t % inner, r = t / inner, q = r % m, o = r / m;
    const I key = keys[q];
    if (q > 0 && keys[q - 1] == key) return;
    const auto v = static_cast<int64_t>(key);
    if (v < 0 || v >= n) {
      if (bad != nullptr) *bad = 1;
      return;
    }
    T* dst = out + (o * n + v) * inner + c;
    T acc = *dst;
    for (int64_t p = q; p < m && keys[p] == key; ++p) acc += src[(o * m + positions[p]) * inner + c];
    *dst = acc;
  }
};

}  // namespace strata_kernels
