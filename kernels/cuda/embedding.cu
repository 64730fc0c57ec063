// Embedding on the GPU: a row gather, and a deterministic weight gradient (sort, then sum
// each row's tokens in token order, as the CPU does) without floating-point atomics.
#include <cub/device/device_radix_sort.cuh>

#include "strata_kernels/elementwise.h"
#include "strata_kernels/embedding.h"

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535 * 8;
constexpr size_t kAlign = 256;

unsigned blocks_for(int64_t work_items) {
  const int64_t want = (work_items + kThreads - 1) / kThreads;
  return static_cast<unsigned>(want < kMaxBlocks ? want : kMaxBlocks);
}

size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

template <class E, class I>
__global__ void gather_kernel(E* out, const E* weight, const I* indices, int64_t n, int64_t dim, int64_t vocab,
                              int32_t* bad) {
  const int64_t total = n * dim;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / dim, c = i % dim;
    const int64_t v = static_cast<int64_t>(indices[row]);
    if (v < 0 || v >= vocab) {
      *bad = 1;
      out[i] = E(0);
    } else {
      out[i] = weight[v * dim + c];
    }
  }
}

template <class I>
cudaError_t forward(int32_t element_size, void* out, const void* weight, const void* indices, int64_t n, int64_t dim,
                    int64_t vocab, int32_t* bad, cudaStream_t stream) {
  const I* idx = static_cast<const I*>(indices);
  const unsigned blocks = blocks_for(n * dim);
  switch (element_size) {
    case 2:
      gather_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<uint16_t*>(out), static_cast<const uint16_t*>(weight),
                                                     idx, n, dim, vocab, bad);
      break;
    case 4:
      gather_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<uint32_t*>(out), static_cast<const uint32_t*>(weight),
                                                     idx, n, dim, vocab, bad);
      break;
    case 8:
      gather_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<uint64_t*>(out), static_cast<const uint64_t*>(weight),
                                                     idx, n, dim, vocab, bad);
      break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

__global__ void iota_kernel(int64_t* p, int64_t n) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    p[i] = i;
}

// Thread (j, c): when sorted position j starts a row's run, that row's column c is the sum
// of its tokens' gradients in position order (the sort is stable), from the zero dweight.
template <class T, class I>
__global__ void row_sums_kernel(T* dweight, const T* grad, const I* keys, const int64_t* positions, int64_t n,
                                int64_t dim) {
  const int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (c >= dim) return;
  for (int64_t j = blockIdx.y; j < n; j += gridDim.y) {
    const I key = keys[j];
    if (j > 0 && keys[j - 1] == key) continue;
    T acc = dweight[static_cast<int64_t>(key) * dim + c];
    for (int64_t m = j; m < n && keys[m] == key; ++m) acc += grad[positions[m] * dim + c];
    dweight[static_cast<int64_t>(key) * dim + c] = acc;
  }
}

// The workspace: sorted keys, positions in, positions out, then CUB's temporary storage.
template <class I>
size_t cub_bytes(int64_t n) {
  size_t bytes = 0;
  if (cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const I*>(nullptr), static_cast<I*>(nullptr),
                                      static_cast<const int64_t*>(nullptr), static_cast<int64_t*>(nullptr),
                                      n) != cudaSuccess)
    return 0;
  return bytes;
}

template <class I>
size_t workspace(int64_t n) {
  const size_t sort = cub_bytes<I>(n);
  if (sort == 0 && n > 0) return 0;
  return aligned(sizeof(I) * n) + 2 * aligned(sizeof(int64_t) * n) + aligned(sort);
}

template <class T, class I>
cudaError_t backward(void* dweight, const void* grad, const void* indices, int64_t n, int64_t dim, void* ws,
                     size_t ws_bytes, cudaStream_t stream) {
  if (n == 0 || dim == 0) return cudaSuccess;
  if (ws_bytes < workspace<I>(n)) return cudaErrorInvalidValue;
  char* p = static_cast<char*>(ws);
  I* keys = reinterpret_cast<I*>(p);
  p += aligned(sizeof(I) * n);
  int64_t* positions_in = reinterpret_cast<int64_t*>(p);
  p += aligned(sizeof(int64_t) * n);
  int64_t* positions = reinterpret_cast<int64_t*>(p);
  p += aligned(sizeof(int64_t) * n);
  size_t sort_bytes = cub_bytes<I>(n);
  iota_kernel<<<blocks_for(n), kThreads, 0, stream>>>(positions_in, n);
  cudaError_t rc = cudaGetLastError();
  if (rc != cudaSuccess) return rc;
  rc = cub::DeviceRadixSort::SortPairs(p, sort_bytes, static_cast<const I*>(indices), keys, positions_in, positions, n,
                                       0, static_cast<int>(sizeof(I) * 8), stream);
  if (rc != cudaSuccess) return rc;
  const int64_t col_blocks = (dim + kThreads - 1) / kThreads;
  const dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(n < 65535 ? n : 65535));
  row_sums_kernel<<<grid, kThreads, 0, stream>>>(static_cast<T*>(dweight), static_cast<const T*>(grad), keys, positions,
                                                 n, dim);
  return cudaGetLastError();
}

template <class T>
cudaError_t backward_typed(int32_t index_type, void* dweight, const void* grad, const void* indices, int64_t n,
                           int64_t dim, void* ws, size_t ws_bytes, cudaStream_t stream) {
  if (index_type == STRATA_ELEMENT_I32)
    return backward<T, int32_t>(dweight, grad, indices, n, dim, ws, ws_bytes, stream);
  if (index_type == STRATA_ELEMENT_I64)
    return backward<T, int64_t>(dweight, grad, indices, n, dim, ws, ws_bytes, stream);
  return cudaErrorInvalidValue;
}

}  // namespace

extern "C" cudaError_t strata_embedding_forward(int32_t index_type, int32_t element_size, void* out, const void* weight,
                                                const void* indices, int64_t n, int64_t dim, int64_t vocab,
                                                int32_t* bad, cudaStream_t stream) {
  if (n * dim == 0) return cudaSuccess;
  if (index_type == STRATA_ELEMENT_I32)
    return forward<int32_t>(element_size, out, weight, indices, n, dim, vocab, bad, stream);
  if (index_type == STRATA_ELEMENT_I64)
    return forward<int64_t>(element_size, out, weight, indices, n, dim, vocab, bad, stream);
  return cudaErrorInvalidValue;
}

extern "C" size_t strata_embedding_backward_workspace(int32_t index_type, int64_t n) {
  if (index_type == STRATA_ELEMENT_I32) return workspace<int32_t>(n);
  if (index_type == STRATA_ELEMENT_I64) return workspace<int64_t>(n);
  return 0;
}

extern "C" cudaError_t strata_embedding_backward(int32_t index_type, int32_t type, void* dweight, const void* grad,
                                                 const void* indices, int64_t n, int64_t dim, void* workspace,
                                                 size_t workspace_bytes, cudaStream_t stream) {
  if (type == STRATA_ELEMENT_F32)
    return backward_typed<float>(index_type, dweight, grad, indices, n, dim, workspace, workspace_bytes, stream);
  if (type == STRATA_ELEMENT_F64)
    return backward_typed<double>(index_type, dweight, grad, indices, n, dim, workspace, workspace_bytes, stream);
  return cudaErrorInvalidValue;
}
