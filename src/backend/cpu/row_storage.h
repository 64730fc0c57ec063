#pragma once
// The storage combinations of a row op that computes in T but may read or write 16-bit data
// (strata_kernels/common/storage16.h): float32 and float64 rows (T everywhere, the ordinary
// ops), and float32 math on bfloat16/float16 data (autocast's 16-bit activations). One
// switch per call; the row loops are instantiated per combination, so none tests a dtype.
#include "strata/core/dtype.h"
#include "strata/tensor/tensor.h"
#include "strata_kernels/common/storage16.h"
#include "tensor/dtype_dispatch.h"

namespace strata::cpu {

// The compute dtype of a row op on `data`: float32 for 16-bit data, else data's own.
inline DType row_compute_dtype(DType data) {
  return data == DType::BFloat16 || data == DType::Float16 ? DType::Float32 : data;
}

// Host pointer to t's elements as the kernels' storage type S (a 16-bit tensor's bits).
template <class S>
S* storage(const Tensor& t) {
  return static_cast<S*>(t.raw_data());
}

// f.template operator()<A, T, B>() for data stored as A and B (each T or, with T = float,
// a 16-bit type): a forward's input and output, or a backward's input and gradient.
template <class F>
void dispatch_row_storage(DType a, DType b, const char* op, F&& f) {
  using strata_kernels::Bf16Storage;
  using strata_kernels::HalfStorage;
  detail::CpuOpScope scope(op);
  auto with_b = [&]<class A>() {
    switch (b) {
      case DType::Float32: return f.template operator()<A, float, float>();
      case DType::BFloat16: return f.template operator()<A, float, Bf16Storage>();
      case DType::Float16: return f.template operator()<A, float, HalfStorage>();
      default: break;
    }
    STRATA_FAIL(op, ": dtype ", b, " cannot pair with ", a, " (float32 math on bfloat16/float16/float32 data)");
  };
  switch (a) {
    case DType::Float64:
      STRATA_CHECK(b == DType::Float64, op, ": dtype ", b, " cannot pair with float64");
      return f.template operator()<double, double, double>();
    case DType::Float32: return with_b.template operator()<float>();
    case DType::BFloat16: return with_b.template operator()<Bf16Storage>();
    case DType::Float16: return with_b.template operator()<HalfStorage>();
    default: break;
  }
  STRATA_FAIL(op, ": dtype ", a, " is not supported on CPU (float32, float64, bfloat16 or float16)");
}

}  // namespace strata::cpu
