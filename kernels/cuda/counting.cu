// nonzero and bincount on the GPU. nonzero: a flag per element (common/nonzero.h's
// is_nonzero), CUB's exclusive sum of the flags (each nonzero element's output row), then a
// kernel writing each element's coordinates at its row, as the CPU's row-major loop orders
// them. bincount: one atomic add per element.
#include <cub/device/device_scan.cuh>

#include "strata_kernels/common/nonzero.h"
#include "strata_kernels/counting.h"
#include "strata_kernels/elementwise.h"

namespace {

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

template <class T>
__global__ void flags_kernel(int64_t* flags, const T* in, int64_t n) {
  STRATA_FOR_EACH(i, n) flags[i] = strata_kernels::is_nonzero(in[i]) ? 1 : 0;
}

__global__ void count_kernel(int64_t* count, const int64_t* flags, const int64_t* rows, int64_t n) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *count = n == 0 ? 0 : rows[n - 1] + flags[n - 1];
}

// __grid_constant__: the shape is indexed by a runtime dimension, which would otherwise copy
// the whole parameter into local memory (refused by -warn-lmem-usage).
template <class T>
__global__ void coords_kernel(int64_t* coords, const T* in, const int64_t* rows, int64_t n,
                              const __grid_constant__ StrataNonzeroShape shape, int32_t ndim) {
  STRATA_FOR_EACH(i, n) {
    if (strata_kernels::is_nonzero(in[i])) strata_kernels::unravel_index(i, shape.sizes, ndim, coords + rows[i] * ndim);
  }
}

template <class T>
__global__ void bincount_kernel(T* out, const int64_t* x, const T* weights, int64_t n) {
  STRATA_FOR_EACH(i, n) atomicAdd(out + x[i], weights[i]);
}

__global__ void count_values_kernel(unsigned long long* out, const int64_t* x, int64_t n) {
  STRATA_FOR_EACH(i, n) atomicAdd(out + x[i], 1ULL);
}

#undef STRATA_FOR_EACH

size_t scan_bytes(int64_t n) {
  size_t bytes = 0;
  if (cub::DeviceScan::ExclusiveSum(nullptr, bytes, static_cast<const int64_t*>(nullptr),
                                    static_cast<int64_t*>(nullptr), n) != cudaSuccess)
    return 0;
  return bytes;
}

// The workspace: flags, output rows, then CUB's temporary storage.
struct Workspace {
  int64_t* flags;
  int64_t* rows;
  void* scan;
  size_t scan_bytes;
};

Workspace carve(void* ws, int64_t n) {
  char* p = static_cast<char*>(ws);
  const size_t vec = aligned(sizeof(int64_t) * static_cast<size_t>(n));
  return Workspace{reinterpret_cast<int64_t*>(p), reinterpret_cast<int64_t*>(p + vec), p + 2 * vec, scan_bytes(n)};
}

// Calls f(T{}) with the element type of `type` (nonzero's set); false for another type.
template <class F>
bool with_type(int32_t type, F&& f) {
  switch (type) {
    case STRATA_ELEMENT_F32: f(float{}); return true;
    case STRATA_ELEMENT_F64: f(double{}); return true;
    case STRATA_ELEMENT_I32: f(int32_t{}); return true;
    case STRATA_ELEMENT_I64: f(int64_t{}); return true;
    case STRATA_ELEMENT_BOOL: f(bool{}); return true;
    default: return false;
  }
}

}  // namespace

extern "C" size_t strata_nonzero_workspace(int64_t n) {
  const size_t scan = scan_bytes(n);
  if (scan == 0) return 0;
  return 2 * aligned(sizeof(int64_t) * static_cast<size_t>(n)) + aligned(scan);
}

extern "C" cudaError_t strata_nonzero_count(int32_t type, const void* in, int64_t n, int64_t* count, void* workspace,
                                            size_t workspace_bytes, cudaStream_t stream) {
  if (workspace_bytes < strata_nonzero_workspace(n)) return cudaErrorInvalidValue;
  Workspace w = carve(workspace, n);
  cudaError_t rc = cudaSuccess;
  const bool known = with_type(type, [&](auto t) {
    using T = decltype(t);
    flags_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(w.flags, static_cast<const T*>(in), n);
    rc = cudaGetLastError();
  });
  if (!known) return cudaErrorInvalidValue;
  if (rc != cudaSuccess) return rc;
  if (n > 0) {
    rc = cub::DeviceScan::ExclusiveSum(w.scan, w.scan_bytes, w.flags, w.rows, n, stream);
    if (rc != cudaSuccess) return rc;
  }
  count_kernel<<<1, 1, 0, stream>>>(count, w.flags, w.rows, n);
  return cudaGetLastError();
}

extern "C" cudaError_t strata_nonzero_coords(int32_t type, int64_t* coords, const void* in, int64_t n,
                                             StrataNonzeroShape shape, int32_t ndim, void* workspace,
                                             size_t workspace_bytes, cudaStream_t stream) {
  if (workspace_bytes < strata_nonzero_workspace(n) || ndim > STRATA_NONZERO_MAX_DIMS) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  Workspace w = carve(workspace, n);
  cudaError_t rc = cudaSuccess;
  const bool known = with_type(type, [&](auto t) {
    using T = decltype(t);
    coords_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(coords, static_cast<const T*>(in), w.rows, n, shape, ndim);
    rc = cudaGetLastError();
  });
  return known ? rc : cudaErrorInvalidValue;
}

extern "C" cudaError_t strata_bincount(int32_t weight_type, void* out, const int64_t* x, const void* weights, int64_t n,
                                       cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (weights == nullptr) {
    static_assert(sizeof(unsigned long long) == sizeof(int64_t), "int64 counts through 64-bit atomics");
    count_values_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<unsigned long long*>(out), x, n);
  } else if (weight_type == STRATA_ELEMENT_F32) {
    bincount_kernel<float>
        <<<blocks_for(n), kThreads, 0, stream>>>(static_cast<float*>(out), x, static_cast<const float*>(weights), n);
  } else if (weight_type == STRATA_ELEMENT_F64) {
    bincount_kernel<double>
        <<<blocks_for(n), kThreads, 0, stream>>>(static_cast<double*>(out), x, static_cast<const double*>(weights), n);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}
