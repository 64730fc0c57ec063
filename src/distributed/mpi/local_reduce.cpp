#include "distributed/mpi/local_reduce.h"

#include "strata/core/error.h"

namespace strata::dist::mpi {
namespace {

// dst[i] = f(a[i], b[i]). Integers use unsigned arithmetic (W): signed overflow would be
// undefined behaviour, MPI's wraps.
template <class T, class F>
void combine_loop(T* dst, const T* a, const T* b, int64_t n, F f) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] = f(a[i], b[i]);
}

template <class T, class W>
void combine_as(ReduceOp op, void* dst, const void* a, const void* b, int64_t n) {
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      combine_loop(d, x, y, n, [](T u, T v) { return static_cast<T>(static_cast<W>(u) + static_cast<W>(v)); });
      return;
    case ReduceOp::Product:
      combine_loop(d, x, y, n, [](T u, T v) { return static_cast<T>(static_cast<W>(u) * static_cast<W>(v)); });
      return;
    case ReduceOp::Max: combine_loop(d, x, y, n, [](T u, T v) { return u > v ? u : v; }); return;
    case ReduceOp::Min: combine_loop(d, x, y, n, [](T u, T v) { return u < v ? u : v; }); return;
  }
  STRATA_FAIL("local reduce: unknown reduce op ", static_cast<int>(op));
}

}  // namespace

void combine(MPI_Datatype type, ReduceOp op, void* dst, const void* a, const void* b, int64_t n) {
  if (type == MPI_FLOAT) return combine_as<float, float>(op, dst, a, b, n);
  if (type == MPI_DOUBLE) return combine_as<double, double>(op, dst, a, b, n);
  if (type == MPI_INT32_T) return combine_as<int32_t, uint32_t>(op, dst, a, b, n);
  if (type == MPI_INT64_T) return combine_as<int64_t, uint64_t>(op, dst, a, b, n);
  STRATA_FAIL("local reduce: unsupported MPI datatype");
}

size_t element_size(MPI_Datatype type) {
  if (type == MPI_FLOAT || type == MPI_INT32_T) return 4;
  if (type == MPI_DOUBLE || type == MPI_INT64_T) return 8;
  if (type == MPI_UINT16_T) return 2;
  if (type == MPI_UINT8_T) return 1;  // bool, moved only
  STRATA_FAIL("local reduce: unsupported MPI datatype");
}

}  // namespace strata::dist::mpi
