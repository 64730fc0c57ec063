#pragma once
// The CPU executor of the shared functors: the work the CUDA executor (cuda/executor.cuh)
// launches, as loops the library's CPU code runs. Host code only. The thread loop over
// chunks belongs to the caller, inside a STRATA_MULTIVERSION function
// (src/backend/cpu/multiversion.h), so that it and this always-inlined chunk loop are
// compiled per ISA level:
//   #pragma omp parallel for
//   for (int64_t c = 0; c < n_chunks; ++c) strata_kernels::run_chunk(tensors, chunks[c], op);
#include <stdint.h>

#include "strata_kernels/common/chunk_reduce.h"
#include "strata_kernels/common/macros.h"
#include "strata_kernels/common/multi_tensor.h"

namespace strata_kernels {

// op(tensors[chunk.tensor], i) for i in [chunk.begin, chunk.end), as one SIMD loop over
// private copies of the entry and the functor (stores through the tensor's pointers then
// cannot alias them, which would stop vectorisation).
template <class Entry, class Op>
STRATA_HD void run_chunk(const Entry* tensors, const TensorChunk& chunk, const Op& op) {
  const Entry t = tensors[chunk.tensor];
  const Op local = op;
  const int64_t end = chunk.end;
#pragma omp simd
  for (int64_t i = chunk.begin; i < end; ++i) local(t, i);
}

// chunk_reduce.h's whole order for one chunk: the partial the GPU's block computes.
template <class Entry, class Op>
typename Op::Acc reduce_chunk(const Entry* tensors, const TensorChunk& chunk, const Op& op) {
  using Acc = typename Op::Acc;
  const Entry t = tensors[chunk.tensor];
  Acc lanes[kReduceLanes];
  for (int l = 0; l < kReduceLanes; ++l) lanes[l] = op.identity();
  for (int64_t base = chunk.begin; base < chunk.end; base += kReduceLanes) {
    const int n = chunk.end - base < kReduceLanes ? static_cast<int>(chunk.end - base) : kReduceLanes;
#pragma omp simd
    for (int l = 0; l < n; ++l) lanes[l] = op.combine(lanes[l], op.partial(t, base + l));
  }
  for (int s = kReduceLanes / 2; s > 0; s /= 2)
    for (int l = 0; l < s; ++l) lanes[l] = op.combine(lanes[l], lanes[l + s]);
  return lanes[0];
}

}  // namespace strata_kernels
