#include "strata_kernels/common/half.h"
#include "strata_kernels/convert.h"

namespace {

template <class In, class Out, class F>
__global__ void map_kernel(const In* src, Out* dst, size_t n, F f) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = f(src[i]);
}

template <class In, class Out, class F>
cudaError_t launch_map(const In* src, Out* dst, size_t n, cudaStream_t stream, F f) {
  if (n == 0) return cudaSuccess;
  const int threads = 256;
  const size_t blocks = (n + threads - 1) / threads;
  map_kernel<<<static_cast<unsigned>(blocks < 65535 ? blocks : 65535), threads, 0, stream>>>(src, dst, n, f);
  return cudaGetLastError();
}

struct ToBf16 {
  __device__ uint16_t operator()(float x) const { return strata_kernels::float_to_bf16_bits(x); }
};
struct FromBf16 {
  __device__ float operator()(uint16_t x) const { return strata_kernels::bf16_bits_to_float(x); }
};
struct ToHalf {
  __device__ uint16_t operator()(float x) const { return strata_kernels::float_to_half_bits(x); }
};
struct FromHalf {
  __device__ float operator()(uint16_t x) const { return strata_kernels::half_bits_to_float(x); }
};

}  // namespace

extern "C" {
cudaError_t strata_float_to_bf16(const float* src, uint16_t* dst, size_t n, cudaStream_t stream) {
  return launch_map(src, dst, n, stream, ToBf16{});
}
cudaError_t strata_bf16_to_float(const uint16_t* src, float* dst, size_t n, cudaStream_t stream) {
  return launch_map(src, dst, n, stream, FromBf16{});
}
cudaError_t strata_float_to_half(const float* src, uint16_t* dst, size_t n, cudaStream_t stream) {
  return launch_map(src, dst, n, stream, ToHalf{});
}
cudaError_t strata_half_to_float(const uint16_t* src, float* dst, size_t n, cudaStream_t stream) {
  return launch_map(src, dst, n, stream, FromHalf{});
}
}
