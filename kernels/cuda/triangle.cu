// tril/triu and one_hot on the GPU: a grid-stride loop over the output running
// common/triangle.h, the CPU loops' functions, so both agree bit for bit.
#include <stdint.h>

#include "strata_kernels/common/triangle.h"
#include "strata_kernels/triangle.h"

namespace {

using namespace strata_kernels;

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535 * 8;

unsigned blocks_for(int64_t work_items) {
  const int64_t want = (work_items + kThreads - 1) / kThreads;
  return static_cast<unsigned>(want < kMaxBlocks ? want : kMaxBlocks);
}

template <class T>
__global__ void triangle_kernel(T* out, const T* in, int64_t total, int64_t rows, int64_t cols, int64_t diagonal,
                                bool lower) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = triangle_element(in, i, rows, cols, diagonal, lower);
}

__global__ void one_hot_kernel(int64_t* out, const int64_t* index, int64_t total, int64_t classes) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = one_hot_element(index, i, classes);
}

template <class T>
cudaError_t launch_triangle(void* out, const void* in, int64_t total, int64_t rows, int64_t cols, int64_t diagonal,
                            bool lower, cudaStream_t stream) {
  triangle_kernel<T><<<blocks_for(total), kThreads, 0, stream>>>(static_cast<T*>(out), static_cast<const T*>(in), total,
                                                                 rows, cols, diagonal, lower);
  return cudaGetLastError();
}

}  // namespace

extern "C" cudaError_t strata_triangle(int32_t element_bytes, void* out, const void* in, int64_t batch, int64_t rows,
                                       int64_t cols, int64_t diagonal, int32_t lower, cudaStream_t stream) {
  const int64_t total = batch * rows * cols;
  if (total == 0) return cudaSuccess;
  switch (element_bytes) {
    case 1: return launch_triangle<uint8_t>(out, in, total, rows, cols, diagonal, lower != 0, stream);
    case 2: return launch_triangle<uint16_t>(out, in, total, rows, cols, diagonal, lower != 0, stream);
    case 4: return launch_triangle<uint32_t>(out, in, total, rows, cols, diagonal, lower != 0, stream);
    case 8: return launch_triangle<uint64_t>(out, in, total, rows, cols, diagonal, lower != 0, stream);
    default: return cudaErrorInvalidValue;
  }
}

extern "C" cudaError_t strata_one_hot(int64_t* out, const int64_t* index, int64_t n, int64_t classes,
                                      cudaStream_t stream) {
  const int64_t total = n * classes;
  if (total == 0) return cudaSuccess;
  one_hot_kernel<<<blocks_for(total), kThreads, 0, stream>>>(out, index, total, classes);
  return cudaGetLastError();
}
