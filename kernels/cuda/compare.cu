// Comparisons and selections on the GPU: common/compare_ops.h's functors (which the CPU
// loops instantiate too) run by the elementwise executor (cuda/map_executor.cuh).
#include "cuda/map_executor.cuh"
#include "strata_kernels/common/compare_ops.h"
#include "strata_kernels/compare.h"
#include "strata_kernels/elementwise.h"

namespace {

using namespace strata_kernels;

// Runs f(T{}) for the element type; cudaErrorInvalidValue for an unknown one.
template <class F>
cudaError_t for_select_type(int32_t type, F&& f) {
  switch (type) {
    case STRATA_ELEMENT_F32: return f(float{});
    case STRATA_ELEMENT_F64: return f(double{});
    case STRATA_ELEMENT_I32: return f(int32_t{});
    case STRATA_ELEMENT_I64: return f(int64_t{});
    case STRATA_ELEMENT_BOOL: return f(bool{});
    default: return cudaErrorInvalidValue;
  }
}

template <class T>
cudaError_t compare(int32_t op, void* out, const void* a, const void* b, const void* index, int64_t n, cudaStream_t s) {
#define STRATA_COMPARE(C) \
  case CompareCode::C: return launch_map<2, bool, T, T>(CompareFn<T, CompareCode::C>{}, out, index, n, s, a, b)
  switch (static_cast<CompareCode>(op)) {
    STRATA_COMPARE(Eq);
    STRATA_COMPARE(Ne);
    STRATA_COMPARE(Lt);
    STRATA_COMPARE(Le);
    STRATA_COMPARE(Gt);
    STRATA_COMPARE(Ge);
  }
#undef STRATA_COMPARE
  return cudaErrorInvalidValue;
}

}  // namespace

extern "C" cudaError_t strata_compare(int32_t op, int32_t type, void* out, const void* a, const void* b,
                                      const void* index, int64_t n, cudaStream_t s) {
  return for_select_type(type, [&](auto t) { return compare<decltype(t)>(op, out, a, b, index, n, s); });
}

extern "C" cudaError_t strata_where(int32_t type, void* out, const void* cond, const void* a, const void* b,
                                    const void* index, int64_t n, cudaStream_t s) {
  return for_select_type(type, [&](auto t) {
    using T = decltype(t);
    return launch_map<3, T, bool, T, T>(WhereFn<T>{}, out, index, n, s, cond, a, b);
  });
}

extern "C" cudaError_t strata_masked_fill(int32_t type, void* out, const void* x, const void* mask, const void* value,
                                          const void* index, int64_t n, cudaStream_t s) {
  return for_select_type(type, [&](auto t) {
    using T = decltype(t);
    return launch_map<2, T, T, bool>(MaskedFillFn<T>{*static_cast<const T*>(value)}, out, index, n, s, x, mask);
  });
}
