// Strided device-to-device copies (views, transposes, broadcasts made contiguous) without
// staging through the host.
#include <stdint.h>

#include "strata_kernels/common/strided_index.h"
#include "strata_kernels/strided_copy.h"

namespace {

using strata_kernels::StridedIndex;

constexpr int kThreads = 256;

template <class Bits>
__global__ void strided_copy_kernel(Bits* dst, const Bits* src, StridedIndex<2> index, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x) {
    int64_t off[2];
    index.offsets(i, off);
    dst[off[0]] = src[off[1]];
  }
}

template <class Bits>
cudaError_t launch(void* dst, const void* src, const StridedIndex<2>& index, int64_t n, cudaStream_t stream) {
  const int64_t want = (n + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(want < 65535 * 8 ? want : 65535 * 8);
  strided_copy_kernel<Bits>
      <<<blocks, kThreads, 0, stream>>>(static_cast<Bits*>(dst), static_cast<const Bits*>(src), index, n);
  return cudaGetLastError();
}

}  // namespace

extern "C" cudaError_t strata_strided_copy(void* dst, const void* src, size_t elem_size, const void* index, int64_t n,
                                           cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const StridedIndex<2>& idx = *static_cast<const StridedIndex<2>*>(index);
  switch (elem_size) {
    case 1: return launch<uint8_t>(dst, src, idx, n, stream);
    case 2: return launch<uint16_t>(dst, src, idx, n, stream);
    case 4: return launch<uint32_t>(dst, src, idx, n, stream);
    case 8: return launch<uint64_t>(dst, src, idx, n, stream);
    default: return cudaErrorInvalidValue;
  }
}
