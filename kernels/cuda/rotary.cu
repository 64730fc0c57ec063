// Rotary position embedding on the GPU: one thread per (row, pair), common/rotary.h's
// functors, the CPU's, so the results are the same bits.
#include "strata_kernels/common/rotary.h"
#include "strata_kernels/elementwise.h"
#include "strata_kernels/rotary.h"

namespace {

using namespace strata_kernels;

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535 * 8;

template <bool kTranspose, class T>
__global__ void rotary_kernel(T* y, const T* x, const T* cos, const T* sin, int64_t rows, int64_t t, int64_t d) {
  const int64_t half = d / 2, total = rows * half;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / half, j = i % half;
    const T* xr = x + r * d;
    const T* c = cos + (r % t) * d;
    const T* s = sin + (r % t) * d;
    const RotaryPair<T> p = kTranspose ? rotary_backward(xr[j], xr[j + half], c[j], s[j], c[j + half], s[j + half])
                                       : rotary_forward(xr[j], xr[j + half], c[j], s[j], c[j + half], s[j + half]);
    y[r * d + j] = p.first;
    y[r * d + j + half] = p.second;
  }
}

template <class T>
cudaError_t launch(bool transpose, void* y, const void* x, const void* cos, const void* sin, int64_t rows, int64_t t,
                   int64_t d, cudaStream_t stream) {
  const int64_t total = rows * (d / 2);
  if (total == 0) return cudaSuccess;
  const int64_t want = (total + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(want < kMaxBlocks ? want : kMaxBlocks);
  auto* out = static_cast<T*>(y);
  const auto* in = static_cast<const T*>(x);
  const auto* c = static_cast<const T*>(cos);
  const auto* s = static_cast<const T*>(sin);
  if (transpose) {
    rotary_kernel<true, T><<<blocks, kThreads, 0, stream>>>(out, in, c, s, rows, t, d);
  } else {
    rotary_kernel<false, T><<<blocks, kThreads, 0, stream>>>(out, in, c, s, rows, t, d);
  }
  return cudaGetLastError();
}

}  // namespace

extern "C" cudaError_t strata_rotary_apply(int32_t type, int32_t transpose, void* y, const void* x, const void* cos,
                                           const void* sin, int64_t rows, int64_t t, int64_t d, cudaStream_t stream) {
  if (type == STRATA_ELEMENT_F32) return launch<float>(transpose != 0, y, x, cos, sin, rows, t, d, stream);
  if (type == STRATA_ELEMENT_F64) return launch<double>(transpose != 0, y, x, cos, sin, rows, t, d, stream);
  return cudaErrorInvalidValue;
}
