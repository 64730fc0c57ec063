// Small int64 tables written through kernel parameters (strata_kernels/small_table.h).
#include "strata_kernels/small_table.h"

namespace {

constexpr int kChunk = 128;  // 1 KiB of parameters per launch (the limit is 4 KiB)

struct Chunk {
  int64_t v[kChunk];
};

__global__ void write_chunk(int64_t* dst, Chunk chunk, int n) {
  const int i = static_cast<int>(threadIdx.x);
  if (i < n) dst[i] = chunk.v[i];
}

}  // namespace

extern "C" cudaError_t strata_write_small_table(int64_t* dst, const int64_t* values, int64_t n, cudaStream_t stream) {
  for (int64_t first = 0; first < n; first += kChunk) {
    const int count = static_cast<int>(n - first < kChunk ? n - first : kChunk);
    Chunk chunk{};
    for (int i = 0; i < count; ++i) chunk.v[i] = values[first + i];
    write_chunk<<<1, kChunk, 0, stream>>>(dst + first, chunk, count);
    const cudaError_t rc = cudaGetLastError();
    if (rc != cudaSuccess) return rc;
  }
  return cudaSuccess;
}
