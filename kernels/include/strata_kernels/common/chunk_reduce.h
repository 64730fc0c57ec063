#pragma once
// Reductions over a chunk table (multi_tensor.h) in one fixed order, so that the CUDA
// executor (cuda/executor.cuh, lanes = the threads of a block) and the CPU executor
// (cpu_executor.h's reduce_chunk, which replays the lanes) give the same bits, whatever the number of
// CPU threads:
//   1. lane t of a chunk (t < kReduceLanes) combines elements begin+t, begin+t+L, ... in
//      that order, starting from op.identity();
//   2. the lanes combine pairwise, halving: for s = L/2, L/4, ..., 1, lane t < s takes
//      combine(lane t, lane t + s);
//   3. lane 0 is the chunk's partial; the caller combines the partials in chunk order.
// An Op has `Acc` (a trivially copyable value), identity(), partial(entry, i) (element i's
// contribution; it may also store, as the unscale op does) and combine(a, b).
#include <stdint.h>

#include "strata_kernels/common/macros.h"
#include "strata_kernels/common/multi_tensor.h"

namespace strata_kernels {

constexpr int kReduceLanes = 256;

}  // namespace strata_kernels
