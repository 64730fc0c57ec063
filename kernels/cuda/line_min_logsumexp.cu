// min/argmin and logsumexp on the GPU: one thread per line of [outer, n, inner] running
// common/line_min_logsumexp.h, as the CPU does, so min's values and indices agree bit for
// bit; logsumexp calls the platform's exp and log (CUDA's device math here, glibc on the
// CPU), which may differ by an ulp or so before the final rounding. Consecutive threads take
// consecutive inner positions, so reads coalesce when inner > 1 (as cuda/line_select.cu).
#include "strata_kernels/common/line_min_logsumexp.h"
#include "strata_kernels/elementwise.h"
#include "strata_kernels/line_min_logsumexp.h"

namespace {

using namespace strata_kernels;

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535 * 8;

unsigned blocks_for(int64_t work_items) {
  const int64_t want = (work_items + kThreads - 1) / kThreads;
  return static_cast<unsigned>(want < kMaxBlocks ? want : kMaxBlocks);
}

template <class T>
__global__ void min_kernel(T* values, int64_t* indices, const T* in, int64_t outer, int64_t n, int64_t inner) {
  for (int64_t line = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; line < outer * inner;
       line += int64_t{gridDim.x} * blockDim.x) {
    const int64_t o = line / inner, i = line % inner;
    line_min(in + o * n * inner + i, n, inner, &values[line], &indices[line]);
  }
}

template <class T>
__global__ void logsumexp_kernel(T* out, const T* in, int64_t outer, int64_t n, int64_t inner) {
  for (int64_t line = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; line < outer * inner;
       line += int64_t{gridDim.x} * blockDim.x) {
    const int64_t o = line / inner, i = line % inner;
    out[line] = line_logsumexp(in + o * n * inner + i, n, inner);
  }
}

template <class T>
cudaError_t launch_min(void* values, int64_t* indices, const void* in, int64_t outer, int64_t n, int64_t inner,
                       cudaStream_t stream) {
  min_kernel<T><<<blocks_for(outer * inner), kThreads, 0, stream>>>(static_cast<T*>(values), indices,
                                                                    static_cast<const T*>(in), outer, n, inner);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_logsumexp(void* out, const void* in, int64_t outer, int64_t n, int64_t inner, cudaStream_t stream) {
  logsumexp_kernel<T><<<blocks_for(outer * inner), kThreads, 0, stream>>>(static_cast<T*>(out),
                                                                          static_cast<const T*>(in), outer, n, inner);
  return cudaGetLastError();
}

}  // namespace

extern "C" cudaError_t strata_line_min(int32_t type, void* values, int64_t* indices, const void* in, int64_t outer,
                                       int64_t n, int64_t inner, cudaStream_t stream) {
  if (outer * inner == 0) return cudaSuccess;
  switch (type) {
    case STRATA_ELEMENT_F32: return launch_min<float>(values, indices, in, outer, n, inner, stream);
    case STRATA_ELEMENT_F64: return launch_min<double>(values, indices, in, outer, n, inner, stream);
    case STRATA_ELEMENT_I32: return launch_min<int32_t>(values, indices, in, outer, n, inner, stream);
    case STRATA_ELEMENT_I64: return launch_min<int64_t>(values, indices, in, outer, n, inner, stream);
    default: return cudaErrorInvalidValue;
  }
}

extern "C" cudaError_t strata_line_logsumexp(int32_t type, void* out, const void* in, int64_t outer, int64_t n,
                                             int64_t inner, cudaStream_t stream) {
  if (outer * inner == 0) return cudaSuccess;
  switch (type) {
    case STRATA_ELEMENT_F32: return launch_logsumexp<float>(out, in, outer, n, inner, stream);
    case STRATA_ELEMENT_F64: return launch_logsumexp<double>(out, in, outer, n, inner, stream);
    default: return cudaErrorInvalidValue;
  }
}
