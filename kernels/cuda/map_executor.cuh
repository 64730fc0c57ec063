#pragma once
// The CUDA executor of the elementwise functors (common/elementwise_ops.h,
// common/compare_ops.h): one grid-stride kernel per (functor, operand types), each thread
// computing out[i] = f(inputs at i) for its elements, as the CPU's map_broadcast loop does
// (src/backend/cpu/broadcast_map.h). Shared by elementwise.cu and compare.cu.
#include <cuda_runtime.h>
#include <stdint.h>

#include "strata_kernels/common/strided_index.h"

namespace strata_kernels {

constexpr int kMapThreads = 256;

// out[i] = f(in0[...], in1[...], in2[...]) (the first N inputs): a flat index where every
// input is contiguous and unbroadcast, else each input's offset from the strided index.
template <int N, class O, class A, class B, class C, class F>
__global__ void map_kernel(O* out, StridedIndex<N> index, int64_t n, bool flat, F f, const A* in0, const B* in1,
                           const C* in2) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x) {
    int64_t off[N];
    if (flat) {
      for (int k = 0; k < N; ++k) off[k] = i;
    } else {
      index.offsets(i, off);
    }
    if constexpr (N == 1) out[i] = f(in0[off[0]]);
    if constexpr (N == 2) out[i] = f(in0[off[0]], in1[off[1]]);
    if constexpr (N == 3) out[i] = f(in0[off[0]], in1[off[1]], in2[off[2]]);
  }
}

// True when every input reads element i at offset i.
template <int N>
bool is_flat(const StridedIndex<N>& index) {
  for (int k = 0; k < N; ++k) {
    int64_t expected = 1;
    for (int d = index.ndim - 1; d >= 0; --d) {
      if (index.sizes[d] != 1 && index.strides[k][d] != expected) return false;
      expected *= index.sizes[d];
    }
  }
  return true;
}

// One launch of map_kernel over n output elements: output type O, input types A, B, C (the
// unused ones ignored); `index` points to a host StridedIndex<N>.
template <int N, class O, class A, class B = A, class C = A, class F>
cudaError_t launch_map(F f, void* out, const void* index, int64_t n, cudaStream_t stream, const void* in0,
                       const void* in1 = nullptr, const void* in2 = nullptr) {
  if (n == 0) return cudaSuccess;
  const StridedIndex<N> idx = *static_cast<const StridedIndex<N>*>(index);
  const int64_t want = (n + kMapThreads - 1) / kMapThreads;
  const unsigned blocks = static_cast<unsigned>(want < 65535 * 8 ? want : 65535 * 8);
  map_kernel<N, O, A, B, C, F>
      <<<blocks, kMapThreads, 0, stream>>>(static_cast<O*>(out), idx, n, is_flat(idx), f, static_cast<const A*>(in0),
                                           static_cast<const B*>(in1), static_cast<const C*>(in2));
  return cudaGetLastError();
}

}  // namespace strata_kernels
