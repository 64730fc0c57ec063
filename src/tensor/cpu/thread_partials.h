#pragma once
// Per-thread partial sums over rows (the parameter gradients of the norms): each thread of
// a parallel region claims a contiguous range of rows, in thread order, and a zeroed slot of
// `width` elements to accumulate into; the slots are then added in thread order, so the
// result is deterministic for a thread count (no atomics).
#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "multiversion.h"

namespace strata::cpu {

template <class T>
class ThreadPartials {
 public:
  // scratch: [threads, width] elements, or null when no partial sums are wanted.
  ThreadPartials(T* scratch, int64_t width) : scratch_(scratch), width_(width) {}

  struct Claim {
    int64_t r0, r1;  // this thread's rows [r0, r1)
    T* slot;         // its zeroed partial sums, or null
  };
  // Called once by every thread of the region (inlined, so it is compiled into each ISA
  // version of the calling kernel).
  STRATA_ALWAYS_INLINE Claim claim(int64_t rows) {
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
    if (tid == 0) used_ = nt;  // read after the region's closing barrier
    T* slot = scratch_ != nullptr ? scratch_ + static_cast<int64_t>(tid) * width_ : nullptr;
    if (slot != nullptr) std::fill(slot, slot + width_, T(0));
    return {rows * tid / nt, rows * (tid + 1) / nt, slot};
  }

  // out[j] += the slots' elements [offset + j], j < n, added in thread order.
  void add_to(T* out, int64_t offset, int64_t n) const {
    for (int t = 0; t < used_; ++t) {
      const T* part = scratch_ + static_cast<int64_t>(t) * width_ + offset;
      for (int64_t j = 0; j < n; ++j) out[j] += part[j];
    }
  }

 private:
  T* scratch_;
  int64_t width_;
  int used_ = 1;
};

}  // namespace strata::cpu
