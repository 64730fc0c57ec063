#include "strata_kernels/fill.h"

namespace {

template <class T>
__global__ void fill_kernel(T* dst, T value, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = value;
}

template <class T>
cudaError_t launch_fill(void* dst, uint64_t bits, size_t n, cudaStream_t stream) {
  const int threads = 256;
  const size_t blocks = (n + threads - 1) / threads;
  fill_kernel<T><<<static_cast<unsigned>(blocks < 65535 ? blocks : 65535), threads, 0, stream>>>(
      static_cast<T*>(dst), static_cast<T>(bits), n);
  return cudaGetLastError();
}

}  // namespace

extern "C" cudaError_t strata_fill_bits(void* dst, size_t element_size, uint64_t bits, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (element_size) {
    case 1: return launch_fill<uint8_t>(dst, bits, n, stream);
    case 2: return launch_fill<uint16_t>(dst, bits, n, stream);
    case 4: return launch_fill<uint32_t>(dst, bits, n, stream);
    case 8: return launch_fill<uint64_t>(dst, bits, n, stream);
    default: return cudaErrorInvalidValue;
  }
}
