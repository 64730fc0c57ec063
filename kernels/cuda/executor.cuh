#pragma once
// The CUDA executor of the shared functors (kernels/common): the same work the CPU executor
// (common/cpu_executor.h) runs as loops. Indices are 64-bit; each loop's bound takes the
// tail, so any size works with any grid.
#include <cuda_runtime.h>
#include <stdint.h>

#include "strata_kernels/common/chunk_reduce.h"
#include "strata_kernels/common/multi_tensor.h"

namespace strata_kernels {

// Elements in flight per thread: their loads are all issued before any math, which is what
// keeps enough bytes in flight to approach the memory bandwidth.
constexpr int kChunkIlp = 4;

// Block b takes chunks b, b + gridDim.x, ...; its threads stride through each chunk, so
// consecutive threads touch consecutive elements (coalesced). Op has the phases of
// common/fused_adam.h's FusedAdamOp: load, apply, store for one element, load4/store4 for
// four aligned ones (vec4_ok). Either way each element's arithmetic is apply, exactly the
// CPU executor's.
template <class Entry, class Op>
__global__ void for_each_chunk_kernel(const Entry* tensors, const TensorChunk* chunks, int64_t n_chunks, Op op) {
  for (int64_t c = blockIdx.x; c < n_chunks; c += gridDim.x) {
    const TensorChunk chunk = chunks[c];
    const Entry t = tensors[chunk.tensor];
    const int64_t stride = blockDim.x;
    int64_t begin = chunk.begin;
    if (chunk.begin % 4 == 0 && op.vec4_ok(t)) {
      // Fast path: each thread takes 4 consecutive elements per step through 128-bit
      // accesses (4 elements in flight, as kChunkIlp); the scalar loop below takes the tail.
      const int64_t vec_end = chunk.begin + (chunk.end - chunk.begin) / 4 * 4;
      for (int64_t i = chunk.begin + 4 * threadIdx.x; i < vec_end; i += 4 * stride) {
        typename Op::Values x[4];
        op.load4(t, i, x);
#pragma unroll
        for (int k = 0; k < 4; ++k) op.apply(t, x[k]);
        op.store4(t, i, x);
      }
      begin = vec_end;
    }
    for (int64_t base = begin + threadIdx.x; base < chunk.end; base += stride * kChunkIlp) {
      typename Op::Values x[kChunkIlp] = {};
#pragma unroll
      for (int k = 0; k < kChunkIlp; ++k)
        if (base + k * stride < chunk.end) x[k] = op.load(t, base + k * stride);
#pragma unroll
      for (int k = 0; k < kChunkIlp; ++k)
        if (base + k * stride < chunk.end) op.apply(t, x[k]);
#pragma unroll
      for (int k = 0; k < kChunkIlp; ++k)
        if (base + k * stride < chunk.end) op.store(t, base + k * stride, x[k]);
    }
  }
}

constexpr int kChunkThreads = 512;

// One launch over the whole table. tensors and chunks are device pointers.
template <class Entry, class Op>
cudaError_t launch_for_each_chunk(const Entry* tensors, const TensorChunk* chunks, int64_t n_chunks, Op op,
                                  cudaStream_t stream) {
  if (n_chunks == 0) return cudaSuccess;
  const int64_t max_blocks = 65535;
  const unsigned blocks = static_cast<unsigned>(n_chunks < max_blocks ? n_chunks : max_blocks);
  for_each_chunk_kernel<<<blocks, kChunkThreads, 0, stream>>>(tensors, chunks, n_chunks, op);
  return cudaGetLastError();
}

// A reduction over the table in common/chunk_reduce.h's order: one block of kReduceLanes
// threads per chunk (thread t is lane t), the lanes halved pairwise in shared memory;
// partials[c] receives chunk c's result.
template <class Entry, class Op>
__global__ void reduce_chunks_kernel(const Entry* tensors, const TensorChunk* chunks, int64_t n_chunks,
                                     typename Op::Acc* partials, Op op) {
  using Acc = typename Op::Acc;
  __shared__ Acc lanes[kReduceLanes];
  const int lane = threadIdx.x;
  for (int64_t c = blockIdx.x; c < n_chunks; c += gridDim.x) {
    const TensorChunk chunk = chunks[c];
    const Entry t = tensors[chunk.tensor];
    Acc acc = op.identity();
    for (int64_t i = chunk.begin + lane; i < chunk.end; i += kReduceLanes) acc = op.combine(acc, op.partial(t, i));
    lanes[lane] = acc;
    __syncthreads();
    for (int s = kReduceLanes / 2; s > 0; s /= 2) {
      if (lane < s) lanes[lane] = op.combine(lanes[lane], lanes[lane + s]);
      __syncthreads();
    }
    if (lane == 0) partials[c] = lanes[0];
    __syncthreads();  // lanes[] is reused by the block's next chunk
  }
}

template <class Entry, class Op>
cudaError_t launch_reduce_chunks(const Entry* tensors, const TensorChunk* chunks, int64_t n_chunks,
                                 typename Op::Acc* partials, Op op, cudaStream_t stream) {
  if (n_chunks == 0) return cudaSuccess;
  const int64_t max_blocks = 65535;
  const unsigned blocks = static_cast<unsigned>(n_chunks < max_blocks ? n_chunks : max_blocks);
  reduce_chunks_kernel<<<blocks, kReduceLanes, 0, stream>>>(tensors, chunks, n_chunks, partials, op);
  return cudaGetLastError();
}

}  // namespace strata_kernels
