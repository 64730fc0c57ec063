// Max/argmax, topk, cumsum and the picked entries' gradient on the GPU: one thread per line
// of [outer, n, inner] running common/line_select.h, as the CPU does, so the results agree
// bit for bit (cumsum: one sequential double sum per line, in the CPU's order). Consecutive
// threads take consecutive inner positions, so reads coalesce when inner > 1; a line along
// the last dimension (inner == 1) is read by its thread alone: simple, and enough for the
// sampling sizes these ops serve (a warp per line would be the next step for long lines).
#include "strata_kernels/common/line_select.h"
#include "strata_kernels/elementwise.h"
#include "strata_kernels/line_select.h"

namespace {

using namespace strata_kernels;

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535 * 8;

unsigned blocks_for(int64_t work_items) {
  const int64_t want = (work_items + kThreads - 1) / kThreads;
  return static_cast<unsigned>(want < kMaxBlocks ? want : kMaxBlocks);
}

// Grid-stride loop over the lines of [outer, n, inner]: `line` is o * inner + i.
#define STRATA_FOR_EACH_LINE(outer, inner)                                                      \
  for (int64_t line = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; line < (outer) * (inner); \
       line += int64_t{gridDim.x} * blockDim.x)

template <class T>
__global__ void max_kernel(T* values, int64_t* indices, const T* in, int64_t outer, int64_t n, int64_t inner) {
  STRATA_FOR_EACH_LINE(outer, inner) {
    const int64_t o = line / inner, i = line % inner;
    line_max(in + o * n * inner + i, n, inner, &values[line], &indices[line]);
  }
}

template <class T>
__global__ void topk_kernel(T* values, int64_t* indices, const T* in, int64_t outer, int64_t n, int64_t inner,
                            int64_t k, bool largest) {
  STRATA_FOR_EACH_LINE(outer, inner) {
    const int64_t o = line / inner, i = line % inner;
    line_topk(in + o * n * inner + i, n, inner, k, largest, values + o * k * inner + i, indices + o * k * inner + i,
              inner);
  }
}

template <class T>
__global__ void cumsum_kernel(T* out, const T* in, int64_t outer, int64_t n, int64_t inner, bool reverse) {
  STRATA_FOR_EACH_LINE(outer, inner) {
    const int64_t o = line / inner, i = line % inner;
    line_cumsum(in + o * n * inner + i, out + o * n * inner + i, n, inner, reverse);
  }
}

template <class T>
__global__ void scatter_add_kernel(T* out, const int64_t* index, const T* grad, int64_t outer, int64_t n, int64_t inner,
                                   int64_t k) {
  STRATA_FOR_EACH_LINE(outer, inner) {
    const int64_t o = line / inner, i = line % inner;
    line_scatter_add(out + o * n * inner + i, inner, index + o * k * inner + i, grad + o * k * inner + i, k, inner);
  }
}

#undef STRATA_FOR_EACH_LINE

template <class T>
cudaError_t launch_max(void* values, int64_t* indices, const void* in, int64_t outer, int64_t n, int64_t inner,
                       cudaStream_t stream) {
  max_kernel<T><<<blocks_for(outer * inner), kThreads, 0, stream>>>(static_cast<T*>(values), indices,
                                                                    static_cast<const T*>(in), outer, n, inner);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_topk(void* values, int64_t* indices, const void* in, int64_t outer, int64_t n, int64_t inner,
                        int64_t k, bool largest, cudaStream_t stream) {
  topk_kernel<T><<<blocks_for(outer * inner), kThreads, 0, stream>>>(
      static_cast<T*>(values), indices, static_cast<const T*>(in), outer, n, inner, k, largest);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_cumsum(void* out, const void* in, int64_t outer, int64_t n, int64_t inner, bool reverse,
                          cudaStream_t stream) {
  cumsum_kernel<T><<<blocks_for(outer * inner), kThreads, 0, stream>>>(static_cast<T*>(out), static_cast<const T*>(in),
                                                                       outer, n, inner, reverse);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_scatter_add(void* out, const int64_t* index, const void* grad, int64_t outer, int64_t n,
                               int64_t inner, int64_t k, cudaStream_t stream) {
  scatter_add_kernel<T><<<blocks_for(outer * inner), kThreads, 0, stream>>>(
      static_cast<T*>(out), index, static_cast<const T*>(grad), outer, n, inner, k);
  return cudaGetLastError();
}

}  // namespace

// The element type's instance of launch_<op>(args...); other types are refused.
#define STRATA_LINE_DISPATCH(type, launch, ...)                   \
  switch (type) {                                                 \
    case STRATA_ELEMENT_F32: return launch<float>(__VA_ARGS__);   \
    case STRATA_ELEMENT_F64: return launch<double>(__VA_ARGS__);  \
    case STRATA_ELEMENT_I32: return launch<int32_t>(__VA_ARGS__); \
    case STRATA_ELEMENT_I64: return launch<int64_t>(__VA_ARGS__); \
    default: return cudaErrorInvalidValue;                        \
  }

extern "C" cudaError_t strata_line_max(int32_t type, void* values, int64_t* indices, const void* in, int64_t outer,
                                       int64_t n, int64_t inner, cudaStream_t stream) {
  if (outer * inner == 0) return cudaSuccess;
  STRATA_LINE_DISPATCH(type, launch_max, values, indices, in, outer, n, inner, stream)
}

extern "C" cudaError_t strata_line_topk(int32_t type, void* values, int64_t* indices, const void* in, int64_t outer,
                                        int64_t n, int64_t inner, int64_t k, int32_t largest, cudaStream_t stream) {
  if (outer * inner == 0 || k == 0) return cudaSuccess;
  STRATA_LINE_DISPATCH(type, launch_topk, values, indices, in, outer, n, inner, k, largest != 0, stream)
}

extern "C" cudaError_t strata_line_cumsum(int32_t type, void* out, const void* in, int64_t outer, int64_t n,
                                          int64_t inner, int32_t reverse, cudaStream_t stream) {
  if (outer * inner == 0 || n == 0) return cudaSuccess;
  STRATA_LINE_DISPATCH(type, launch_cumsum, out, in, outer, n, inner, reverse != 0, stream)
}

extern "C" cudaError_t strata_line_scatter_add(int32_t type, void* out, const int64_t* index, const void* grad,
                                               int64_t outer, int64_t n, int64_t inner, int64_t k,
                                               cudaStream_t stream) {
  if (outer * inner == 0 || k == 0) return cudaSuccess;
  STRATA_LINE_DISPATCH(type, launch_scatter_add, out, index, grad, outer, n, inner, k, stream)
}
