#pragma once
// dtype switches for host (CPU) code: a runtime dtype becomes a template argument,
//   dispatch_floating(t.dtype(), "gelu", [&]<class T>() { ...T... });
// CPU-only: the loops they run read host memory. Device choice happens earlier, in the
// op's device switch (backend/dispatch/device_dispatch.h).
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "strata/core/dtype.h"
#include "strata/core/error.h"
#include "strata/tensor/tensor.h"

namespace strata::detail {

// The CPU op running on this thread (set by dispatch_floating/dispatch_arith), so that the
// host-pointer accessors (Tensor::raw_data, data<T>) can name the op when a CUDA tensor
// reaches CPU code. Null outside a named dispatch.
const char* current_cpu_op();
class CpuOpScope {
 public:
  explicit CpuOpScope(const char* op);
  ~CpuOpScope();
  CpuOpScope(const CpuOpScope&) = delete;
  CpuOpScope& operator=(const CpuOpScope&) = delete;

 private:
  const char* previous_;
};

// Every dtype (copies, conversions, factories).
template <class F>
decltype(auto) dispatch_all(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Float32: return f.template operator()<float>();
    case DType::Float64: return f.template operator()<double>();
    case DType::BFloat16: return f.template operator()<bfloat16>();
    case DType::Float16: return f.template operator()<float16>();
    case DType::Int32: return f.template operator()<int32_t>();
    case DType::Int64: return f.template operator()<int64_t>();
    case DType::Bool: return f.template operator()<bool>();
  }
  STRATA_FAIL("unknown dtype ", static_cast<int>(dtype));
}

// float32 and float64: the dtypes every differentiable CPU op computes in.
template <class F>
decltype(auto) dispatch_floating(DType dtype, const char* op, F&& f) {
  CpuOpScope scope(op);
  switch (dtype) {
    case DType::Float32: return f.template operator()<float>();
    case DType::Float64: return f.template operator()<double>();
    default: break;
  }
  STRATA_FAIL(op, ": dtype ", dtype, " is not supported on CPU (float32 or float64; convert with .to())");
}

// float32, float64, int32, int64: arithmetic without a 16-bit storage type.
template <class F>
decltype(auto) dispatch_arith(DType dtype, const char* op, F&& f) {
  CpuOpScope scope(op);
  switch (dtype) {
    case DType::Float32: return f.template operator()<float>();
    case DType::Float64: return f.template operator()<double>();
    case DType::Int32: return f.template operator()<int32_t>();
    case DType::Int64: return f.template operator()<int64_t>();
    default: break;
  }
  STRATA_FAIL(op, ": dtype ", dtype, " is not supported on CPU (float32, float64, int32 or int64; convert with .to())");
}

// The arithmetic dtypes and bool: what comparisons and selections (where) read.
template <class F>
decltype(auto) dispatch_arith_or_bool(DType dtype, const char* op, F&& f) {
  if (dtype == DType::Bool) {
    CpuOpScope scope(op);
    return f.template operator()<bool>();
  }
  return dispatch_arith(dtype, op, std::forward<F>(f));
}

// Value conversion between storage types (16-bit floats go through float).
template <class To, class From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, bfloat16> || std::is_same_v<To, float16>) {
    return To(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

// A double scalar operand in T. Integer T saturates to its range (a missing clamp bound is
// +-inf, which a plain cast would turn into undefined behaviour).
template <class T>
inline T scalar_as(double v) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    constexpr T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
    if (!(v > static_cast<double>(lo))) return lo;
    if (v >= static_cast<double>(hi)) return hi;
  }
  return convert<T>(v);
}

}  // namespace strata::detail
