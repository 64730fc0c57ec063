// Rotary position embedding on the GPU: one thread per (row, pair), common/rotary.h's
// functors, the CPU's, so the results are the same bits.
#include "strata_kernels/common/rotary.h"
#include "strata_kernels/common/storage16.h"
#include "strata_kernels/elementwise.h"
#include "strata_kernels/rotary.h"

namespace {

using namespace strata_kernels;

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535 * 8;

// S: x's and y's storage (T, or 16-bit with T float: widened on load, rounded on store).
template <bool kTranspose, class S, class T>
__global__ void rotary_kernel(S* y, const S* x, const T* cos, const T* sin, int64_t rows, int64_t t, int64_t d) {
  const int64_t half = d / 2, total = rows * half;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / half, j = i % half;
    const S* xr = x + r * d;
    const T* c = cos + (r % t) * d;
    const T* s = sin + (r % t) * d;
    const T x1 = widen(xr[j]), x2 = widen(xr[j + half]);
    const RotaryPair<T> p = kTranspose ? rotary_backward(x1, x2, c[j], s[j], c[j + half], s[j + half])
                                       : rotary_forward(x1, x2, c[j], s[j], c[j + half], s[j + half]);
    store(y[r * d + j], p.first);
    store(y[r * d + j + half], p.second);
  }
}

template <class S, class T>
cudaError_t launch(bool transpose, void* y, const void* x, const void* cos, const void* sin, int64_t rows, int64_t t,
                   int64_t d, cudaStream_t stream) {
  const int64_t total = rows * (d / 2);
  if (total == 0) return cudaSuccess;
  const int64_t want = (total + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(want < kMaxBlocks ? want : kMaxBlocks);
  auto* out = static_cast<S*>(y);
  const auto* in = static_cast<const S*>(x);
  const auto* c = static_cast<const T*>(cos);
  const auto* s = static_cast<const T*>(sin);
  if (transpose) {
    rotary_kernel<true, S, T><<<blocks, kThreads, 0, stream>>>(out, in, c, s, rows, t, d);
  } else {
    rotary_kernel<false, S, T><<<blocks, kThreads, 0, stream>>>(out, in, c, s, rows, t, d);
  }
  return cudaGetLastError();
}

}  // namespace

extern "C" cudaError_t strata_rotary_apply(int32_t type, int32_t transpose, void* y, const void* x, const void* cos,
                                           const void* sin, int64_t rows, int64_t t, int64_t d, cudaStream_t stream) {
  const bool tr = transpose != 0;
  if (type == STRATA_ELEMENT_F32) return launch<float, float>(tr, y, x, cos, sin, rows, t, d, stream);
  if (type == STRATA_ELEMENT_F64) return launch<double, double>(tr, y, x, cos, sin, rows, t, d, stream);
  if (type == STRATA_ELEMENT_BF16) return launch<Bf16Storage, float>(tr, y, x, cos, sin, rows, t, d, stream);
  if (type == STRATA_ELEMENT_F16) return launch<HalfStorage, float>(tr, y, x, cos, sin, rows, t, d, stream);
  return cudaErrorInvalidValue;
}
