#pragma once
// f(i) for every i < n as one grid-stride kernel: the CUDA executor of the per-element
// functors whose CPU executor is a plain loop (common/unary16.h, common/binary16.h).
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda/float_dispatch.cuh"

namespace strata_kernels {

template <class F>
__global__ void for_each_n_kernel(int64_t n, F f) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x) f(i);
}

template <class F>
cudaError_t for_each_n(int64_t n, F f, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  for_each_n_kernel<<<grid_for(n), kFloatKernelThreads, 0, s>>>(n, f);
  return cudaGetLastError();
}

}  // namespace strata_kernels
