#pragma once
// The GPU executor of the row functions (common/row_reduce.h's order): one warp per row,
// warp lane t being lane t of the order. The halving step is __shfl_down_sync (lane t < s
// receives lane t + s's value, exactly the CPU replay's pairs); lane 0's result is then
// broadcast so every lane continues with the row's value.
#include <cuda_runtime.h>
#include <stdint.h>

#include "strata_kernels/common/row_reduce.h"

namespace strata_kernels {

static_assert(kRowLanes == 32, "WarpRow runs one row per warp");

struct WarpRow {
  static constexpr unsigned kAll = 0xffffffffu;

  __device__ __forceinline__ static int lane() { return static_cast<int>(threadIdx.x) & (kRowLanes - 1); }

  __device__ __forceinline__ static double halve(double acc) {
#pragma unroll
    for (int s = kRowLanes / 2; s > 0; s /= 2) acc += __shfl_down_sync(kAll, acc, s);
    return __shfl_sync(kAll, acc, 0);
  }

  template <class F>
  __device__ __forceinline__ static double sum(int64_t n, F&& f) {
    double acc = 0;
    for (int64_t j = lane(); j < n; j += kRowLanes) acc += f(j);
    return halve(acc);
  }

  template <class F>
  __device__ __forceinline__ static Sum2 sum2(int64_t n, F&& f) {
    double a = 0, b = 0;
    for (int64_t j = lane(); j < n; j += kRowLanes) {
      const Sum2 v = f(j);
      a += v.a;
      b += v.b;
    }
    return {halve(a), halve(b)};
  }

  // The same comparison as CpuRow::max (a NaN never replaces the running maximum); the
  // maximum does not depend on the order, so a butterfly leaves it on every lane.
  template <class T, class F>
  __device__ __forceinline__ static T max(int64_t n, F&& f, T lo) {
    T m = lo;
    for (int64_t j = lane(); j < n; j += kRowLanes) {
      const T v = f(j);
      m = v > m ? v : m;
    }
#pragma unroll
    for (int s = kRowLanes / 2; s > 0; s /= 2) {
      const T o = __shfl_xor_sync(kAll, m, s);
      m = o > m ? o : m;
    }
    return m;
  }

  template <class F>
  __device__ __forceinline__ static void for_each(int64_t n, F&& f) {
    for (int64_t j = lane(); j < n; j += kRowLanes) f(j);
  }

  __device__ __forceinline__ static bool leader() { return lane() == 0; }
};

constexpr int kRowsPerBlock = 8;  // warps (rows in flight) per block of the row kernels

// fn(r) for every row r < rows, one warp each. Whole warps skip a row index past the end,
// so every shuffle has all 32 lanes.
template <class RowFn>
__global__ void for_each_row_kernel(int64_t rows, RowFn fn) {
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kRowLanes;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kRowsPerBlock;
  for (int64_t r = first; r < rows; r += step) fn(r);
}

template <class RowFn>
cudaError_t launch_for_each_row(int64_t rows, RowFn fn, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const int64_t max_blocks = 65535;
  const int64_t needed = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  const unsigned blocks = static_cast<unsigned>(needed < max_blocks ? needed : max_blocks);
  for_each_row_kernel<<<blocks, kRowsPerBlock * kRowLanes, 0, stream>>>(rows, fn);
  return cudaGetLastError();
}

}  // namespace strata_kernels
