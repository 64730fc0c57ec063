// The sum over a dimension block on the GPU, in common/dim_reduce.h's order (the CPU sum's),
// so both give the same bits: lanes are a warp's threads when each output's elements are
// contiguous (inner == 1), else 32 threads of a column (few outputs) or one thread replaying
// all the lanes of its column (many outputs).
#include "strata_kernels/common/dim_reduce.h"
#include "strata_kernels/elementwise.h"
#include "strata_kernels/reduce.h"

namespace {

using namespace strata_kernels;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kDimReduceLanes;
constexpr int64_t kMaxBlocks = 65535 * 8;

unsigned blocks_for(int64_t work_items, int64_t per_block) {
  const int64_t want = (work_items + per_block - 1) / per_block;
  return static_cast<unsigned>(want < kMaxBlocks ? want : kMaxBlocks);
}

// inner == 1: warp w takes rows w, w + all warps, ...; its lane t is the order's lane t
// (coalesced: the warp reads 32 consecutive elements per step), and the shuffle tree is the
// order's halving (lane t < s adds lane t + s).
template <class T>
__global__ void sum_rows_kernel(T* out, const T* in, int64_t outer, int64_t n) {
  using Acc = typename DimReduceAcc<T>::type;
  const int lane = static_cast<int>(threadIdx.x) % kDimReduceLanes;
  const int64_t warps = int64_t{gridDim.x} * kWarps;
  for (int64_t row = int64_t{blockIdx.x} * kWarps + threadIdx.x / kDimReduceLanes; row < outer; row += warps) {
    Acc acc = dim_reduce_lane<T, Acc>(in + row * n, n, 1, lane);
    for (int s = kDimReduceLanes / 2; s > 0; s /= 2) {
      const Acc other = __shfl_down_sync(0xffffffffu, acc, s);
      if (lane < s) acc += other;
    }
    if (lane == 0) out[row] = static_cast<T>(acc);
  }
}

// inner > 1 with many outputs: one thread per output (consecutive threads, consecutive
// columns: coalesced), running the whole order itself.
template <class T>
__global__ void sum_columns_kernel(T* out, const T* in, int64_t outer, int64_t n, int64_t inner) {
  const int64_t total = outer * inner;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t o = i / inner, c = i % inner;
    out[i] = static_cast<T>(dim_reduce_serial(in + o * n * inner + c, n, inner));
  }
}

// inner > 1 with few outputs (a bias gradient has one per column): 32 times the threads. A
// block takes 32 columns x 32 lanes; thread (column, t) adds the column's elements t, t + 32,
// ... (each warp reads 32 consecutive columns: coalesced), then the lanes halve pairwise in
// shared memory: the order's lanes, one thread each.
template <class T>
__global__ void sum_column_lanes_kernel(T* out, const T* in, int64_t outer, int64_t n, int64_t inner) {
  using Acc = typename DimReduceAcc<T>::type;
  __shared__ Acc lanes[kDimReduceLanes][kDimReduceLanes];
  const int col = static_cast<int>(threadIdx.x), t = static_cast<int>(threadIdx.y);
  const int64_t col_blocks = (inner + kDimReduceLanes - 1) / kDimReduceLanes;
  for (int64_t b = blockIdx.x; b < outer * col_blocks; b += gridDim.x) {
    const int64_t o = b / col_blocks, c = b % col_blocks * kDimReduceLanes + col;
    lanes[t][col] = c < inner ? dim_reduce_lane<T, Acc>(in + o * n * inner + c, n, inner, t) : Acc(0);
    __syncthreads();
    for (int s = kDimReduceLanes / 2; s > 0; s /= 2) {
      if (t < s) lanes[t][col] += lanes[t + s][col];
      __syncthreads();
    }
    if (t == 0 && c < inner) out[o * inner + c] = static_cast<T>(lanes[0][col]);
    __syncthreads();  // lanes[] is reused by the block's next columns
  }
}

// Outputs from which a thread per output fills the GPU on its own.
constexpr int64_t kManyOutputs = 65536;

template <class T>
cudaError_t launch(void* out, const void* in, int64_t outer, int64_t n, int64_t inner, cudaStream_t stream) {
  if (outer * inner == 0) return cudaSuccess;
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(in);
  if (inner == 1) {
    sum_rows_kernel<T><<<blocks_for(outer, kWarps), kThreads, 0, stream>>>(o, x, outer, n);
  } else if (outer * inner >= kManyOutputs) {
    sum_columns_kernel<T><<<blocks_for(outer * inner, kThreads), kThreads, 0, stream>>>(o, x, outer, n, inner);
  } else {
    const int64_t col_blocks = (inner + kDimReduceLanes - 1) / kDimReduceLanes;
    sum_column_lanes_kernel<T>
        <<<blocks_for(outer * col_blocks, 1), dim3(kDimReduceLanes, kDimReduceLanes), 0, stream>>>(o, x, outer, n,
                                                                                                   inner);
  }
  return cudaGetLastError();
}

}  // namespace

extern "C" cudaError_t strata_dim_sum(int32_t type, void* out, const void* in, int64_t outer, int64_t n, int64_t inner,
                                      cudaStream_t stream) {
  switch (type) {
    case STRATA_ELEMENT_F32: return launch<float>(out, in, outer, n, inner, stream);
    case STRATA_ELEMENT_F64: return launch<double>(out, in, outer, n, inner, stream);
    case STRATA_ELEMENT_I32: return launch<int32_t>(out, in, outer, n, inner, stream);
    case STRATA_ELEMENT_I64: return launch<int64_t>(out, in, outer, n, inner, stream);
    default: return cudaErrorInvalidValue;
  }
}
