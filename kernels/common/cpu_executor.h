#pragma once
// The CPU executor of the shared functors: the work the CUDA executor (cuda/executor.cuh)
// launches, as loops the library's CPU code runs. Host code only. The thread loop over
// chunks belongs to the caller, inside a STRATA_MULTIVERSION function
// (src/tensor/cpu/multiversion.h), so that it and this always-inlined chunk loop are
// compiled per ISA level:
//   #pragma omp parallel for
//   for (int64_t c = 0; c < n_chunks; ++c) strata_kernels::run_chunk(tensors, chunks[c], op);
#include <stdint.h>

#include "macros.h"
#include "multi_tensor.h"

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

}  // namespace strata_kernels
