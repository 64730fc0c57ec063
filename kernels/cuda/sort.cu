// sort on the GPU: order-preserving keys (common/sort_key.h, the CPU sort's keys), CUB's
// stable segmented sort of (key, position) pairs with one segment per row, then a gather
// of the values at the sorted positions.
#include <cub/device/device_segmented_sort.cuh>

#include "strata_kernels/common/sort_key.h"
#include "strata_kernels/elementwise.h"
#include "strata_kernels/sort.h"

namespace {

using strata_kernels::SortKey;

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535 * 8;
constexpr size_t kAlign = 256;

unsigned blocks_for(int64_t work_items) {
  const int64_t want = (work_items + kThreads - 1) / kThreads;
  return static_cast<unsigned>(want < kMaxBlocks ? want : kMaxBlocks);
}

size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

#define STRATA_FOR_EACH(i, total) \
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < (total); i += int64_t{gridDim.x} * blockDim.x)

// keys[i] and the position of element i within its row; offsets[r] = r * n for r <= rows.
template <class T>
__global__ void keys_kernel(SortKey<T>* keys, int64_t* positions, int64_t* offsets, const T* in, int64_t rows,
                            int64_t n) {
  STRATA_FOR_EACH(i, rows * n) {
    keys[i] = strata_kernels::sort_key(in[i]);
    positions[i] = i % n;
  }
  STRATA_FOR_EACH(r, rows + 1) offsets[r] = r * n;
}

template <class T>
__global__ void gather_kernel(T* values, const int64_t* indices, const T* in, int64_t rows, int64_t n) {
  STRATA_FOR_EACH(i, rows * n) values[i] = in[(i / n) * n + indices[i]];
}

#undef STRATA_FOR_EACH

// The workspace: keys in, keys out, positions in, row offsets, then CUB's temporary storage.
template <class T>
size_t cub_bytes(int64_t rows, int64_t n) {
  using K = SortKey<T>;
  size_t bytes = 0;
  if (cub::DeviceSegmentedSort::StableSortPairs(
          nullptr, bytes, static_cast<const K*>(nullptr), static_cast<K*>(nullptr),
          static_cast<const int64_t*>(nullptr), static_cast<int64_t*>(nullptr), rows * n, rows,
          static_cast<const int64_t*>(nullptr), static_cast<const int64_t*>(nullptr)) != cudaSuccess)
    return 0;
  return bytes;
}

template <class T>
size_t workspace(int64_t rows, int64_t n) {
  const size_t total = static_cast<size_t>(rows * n);
  return 2 * aligned(sizeof(SortKey<T>) * total) + aligned(sizeof(int64_t) * total) +
         aligned(sizeof(int64_t) * static_cast<size_t>(rows + 1)) + aligned(cub_bytes<T>(rows, n));
}

template <class T>
cudaError_t sort_rows(void* values, int64_t* indices, const void* in, int64_t rows, int64_t n, bool descending,
                      void* ws, size_t ws_bytes, cudaStream_t stream) {
  using K = SortKey<T>;
  if (rows * n == 0) return cudaSuccess;
  if (ws_bytes < workspace<T>(rows, n)) return cudaErrorInvalidValue;
  const size_t total = static_cast<size_t>(rows * n);
  char* p = static_cast<char*>(ws);
  K* keys_in = reinterpret_cast<K*>(p);
  p += aligned(sizeof(K) * total);
  K* keys_out = reinterpret_cast<K*>(p);
  p += aligned(sizeof(K) * total);
  int64_t* positions = reinterpret_cast<int64_t*>(p);
  p += aligned(sizeof(int64_t) * total);
  int64_t* offsets = reinterpret_cast<int64_t*>(p);
  p += aligned(sizeof(int64_t) * static_cast<size_t>(rows + 1));
  size_t sort_bytes = cub_bytes<T>(rows, n);
  const T* x = static_cast<const T*>(in);
  keys_kernel<T><<<blocks_for(rows * n), kThreads, 0, stream>>>(keys_in, positions, offsets, x, rows, n);
  cudaError_t rc = cudaGetLastError();
  if (rc != cudaSuccess) return rc;
  rc = descending
           ? cub::DeviceSegmentedSort::StableSortPairsDescending(p, sort_bytes, keys_in, keys_out, positions, indices,
                                                                 rows * n, rows, offsets, offsets + 1, stream)
           : cub::DeviceSegmentedSort::StableSortPairs(p, sort_bytes, keys_in, keys_out, positions, indices, rows * n,
                                                       rows, offsets, offsets + 1, stream);
  if (rc != cudaSuccess) return rc;
  gather_kernel<T><<<blocks_for(rows * n), kThreads, 0, stream>>>(static_cast<T*>(values), indices, x, rows, n);
  return cudaGetLastError();
}

}  // namespace

extern "C" size_t strata_sort_rows_workspace(int32_t type, int64_t rows, int64_t n) {
  switch (type) {
    case STRATA_ELEMENT_F32: return workspace<float>(rows, n);
    case STRATA_ELEMENT_F64: return workspace<double>(rows, n);
    case STRATA_ELEMENT_I32: return workspace<int32_t>(rows, n);
    case STRATA_ELEMENT_I64: return workspace<int64_t>(rows, n);
    default: return 0;
  }
}

extern "C" cudaError_t strata_sort_rows(int32_t type, void* values, int64_t* indices, const void* in, int64_t rows,
                                        int64_t n, int32_t descending, void* workspace, size_t workspace_bytes,
                                        cudaStream_t stream) {
  switch (type) {
    case STRATA_ELEMENT_F32:
      return sort_rows<float>(values, indices, in, rows, n, descending != 0, workspace, workspace_bytes, stream);
    case STRATA_ELEMENT_F64:
      return sort_rows<double>(values, indices, in, rows, n, descending != 0, workspace, workspace_bytes, stream);
    case STRATA_ELEMENT_I32:
      return sort_rows<int32_t>(values, indices, in, rows, n, descending != 0, workspace, workspace_bytes, stream);
    case STRATA_ELEMENT_I64:
      return sort_rows<int64_t>(values, indices, in, rows, n, descending != 0, workspace, workspace_bytes, stream);
    default: return cudaErrorInvalidValue;
  }
}
