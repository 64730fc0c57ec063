// index_select and index_add along one dimension on the GPU: a row gather, and a
// deterministic accumulation (sort the index, then sum each destination's sources in the
// CPU's order) without floating-point atomics. The per-element work is common/index_rows.h.
#include <cub/device/device_radix_sort.cuh>

#include "cuda/for_each_n.cuh"
#include "strata_kernels/common/index_rows.h"
#include "strata_kernels/elementwise.h"
#include "strata_kernels/index_rows.h"

namespace {

using strata_kernels::for_each_n;
using strata_kernels::SelectRows;
using strata_kernels::SumRuns;

constexpr size_t kAlign = 256;

size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// f(I{}) for the index type; cudaErrorInvalidValue for others.
template <class F>
cudaError_t for_index_type(int32_t index_type, F&& f) {
  if (index_type == STRATA_ELEMENT_I32) return f(int32_t{});
  if (index_type == STRATA_ELEMENT_I64) return f(int64_t{});
  return cudaErrorInvalidValue;
}

// f(T{}) for index_add's element types (the CPU's dispatch_arith set).
template <class F>
cudaError_t for_arith_type(int32_t type, F&& f) {
  switch (type) {
    case STRATA_ELEMENT_F32: return f(float{});
    case STRATA_ELEMENT_F64: return f(double{});
    case STRATA_ELEMENT_I32: return f(int32_t{});
    case STRATA_ELEMENT_I64: return f(int64_t{});
    default: return cudaErrorInvalidValue;
  }
}

template <class I>
cudaError_t select(int32_t element_size, void* out, const void* in, const I* index, int64_t outer, int64_t n,
                   int64_t inner, int64_t m, int32_t* bad, cudaStream_t stream) {
  const int64_t total = outer * m * inner;
  auto run = [&](auto width) {
    using E = decltype(width);
    return for_each_n(total, SelectRows<E, I>{static_cast<E*>(out), static_cast<const E*>(in), index, n, m, inner, bad},
                      stream);
  };
  switch (element_size) {
    case 1: return run(uint8_t{});
    case 2: return run(uint16_t{});
    case 4: return run(uint32_t{});
    case 8: return run(uint64_t{});
    default: return cudaErrorInvalidValue;
  }
}

struct Iota {
  int64_t* p;
  __device__ void operator()(int64_t i) const { p[i] = i; }
};

// The workspace: sorted keys, positions in, positions out, then CUB's temporary storage.
template <class I>
size_t cub_bytes(int64_t m) {
  size_t bytes = 0;
  if (cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const I*>(nullptr), static_cast<I*>(nullptr),
                                      static_cast<const int64_t*>(nullptr), static_cast<int64_t*>(nullptr),
                                      m) != cudaSuccess)
    return 0;
  return bytes;
}

template <class I>
size_t workspace(int64_t m) {
  const size_t sort = cub_bytes<I>(m);
  if (sort == 0 && m > 0) return 0;
  return aligned(sizeof(I) * m) + 2 * aligned(sizeof(int64_t) * m) + aligned(sort);
}

template <class T, class I>
cudaError_t add(void* out, const void* src, const I* index, int64_t outer, int64_t n, int64_t inner, int64_t m,
                int32_t* bad, void* ws, size_t ws_bytes, cudaStream_t stream) {
  if (outer * m * inner == 0) return cudaSuccess;
  if (ws_bytes < workspace<I>(m)) return cudaErrorInvalidValue;
  char* p = static_cast<char*>(ws);
  I* keys = reinterpret_cast<I*>(p);
  p += aligned(sizeof(I) * m);
  int64_t* positions_in = reinterpret_cast<int64_t*>(p);
  p += aligned(sizeof(int64_t) * m);
  int64_t* positions = reinterpret_cast<int64_t*>(p);
  p += aligned(sizeof(int64_t) * m);
  size_t sort_bytes = cub_bytes<I>(m);
  cudaError_t rc = for_each_n(m, Iota{positions_in}, stream);
  if (rc != cudaSuccess) return rc;
  rc = cub::DeviceRadixSort::SortPairs(p, sort_bytes, index, keys, positions_in, positions, m, 0,
                                       static_cast<int>(sizeof(I) * 8), stream);
  if (rc != cudaSuccess) return rc;
  return for_each_n(outer * m * inner,
                    SumRuns<T, I>{static_cast<T*>(out), static_cast<const T*>(src), keys, positions, n, m, inner, bad},
                    stream);
}

}  // namespace

extern "C" cudaError_t strata_index_select(int32_t index_type, int32_t element_size, void* out, const void* in,
                                           const void* index, int64_t outer, int64_t n, int64_t inner, int64_t m,
                                           int32_t* bad, cudaStream_t stream) {
  if (outer * m * inner == 0) return cudaSuccess;
  return for_index_type(index_type, [&](auto i) {
    using I = decltype(i);
    return select<I>(element_size, out, in, static_cast<const I*>(index), outer, n, inner, m, bad, stream);
  });
}

extern "C" size_t strata_index_add_workspace(int32_t index_type, int64_t m) {
  if (index_type == STRATA_ELEMENT_I32) return workspace<int32_t>(m);
  if (index_type == STRATA_ELEMENT_I64) return workspace<int64_t>(m);
  return 0;
}

extern "C" cudaError_t strata_index_add(int32_t index_type, int32_t type, void* out, const void* src, const void* index,
                                        int64_t outer, int64_t n, int64_t inner, int64_t m, int32_t* bad,
                                        void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  return for_arith_type(type, [&](auto t) {
    using T = decltype(t);
    return for_index_type(index_type, [&](auto i) {
      using I = decltype(i);
      return add<T, I>(out, src, static_cast<const I*>(index), outer, n, inner, m, bad, workspace, workspace_bytes,
                       stream);
    });
  });
}
