#include "backend/cpu/binary16.h"

#include "backend/cpu/multiversion.h"
#include "backend/cpu/row_storage.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/common/binary16.h"

namespace strata::cpu {
namespace {

using strata_kernels::Bf16Storage;
using strata_kernels::HalfStorage;

// An add is one load-add-store: threads pay off only on large tensors (as a copy).
constexpr int64_t kParallelThreshold = 32768;

template <class F>
STRATA_MULTIVERSION void for_each_n(int64_t n, F f) {
#pragma omp parallel for simd if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) f(i);
}

// f.template operator()<V>() with V float for float32 data, S for `sixteen` data.
template <class S, class F>
void float_or(DType dtype, DType sixteen, const char* op, F&& f) {
  if (dtype == DType::Float32) return f.template operator()<float>();
  STRATA_CHECK(dtype == sixteen, op, ": dtype ", dtype, " cannot pair with ", sixteen, " (float32 or ", sixteen, ")");
  return f.template operator()<S>();
}

template <class S, strata_kernels::BinaryCode C>
void run(const Tensor& a, const Tensor& b, const Tensor& out, DType sixteen, const char* op) {
  float_or<S>(a.dtype(), sixteen, op, [&]<class A>() {
    float_or<S>(b.dtype(), sixteen, op, [&]<class B>() {
      float_or<S>(out.dtype(), sixteen, op, [&]<class O>() {
        for_each_n(out.numel(),
                   strata_kernels::Binary16<A, B, O, C>{storage<const A>(a), storage<const B>(b), storage<O>(out)});
      });
    });
  });
}

template <strata_kernels::BinaryCode C>
void run_op(const Tensor& a, const Tensor& b, const Tensor& out, DType sixteen, const char* op) {
  if (sixteen == DType::BFloat16) return run<Bf16Storage, C>(a, b, out, sixteen, op);
  STRATA_CHECK(sixteen == DType::Float16, op, ": no 16-bit operand (bfloat16 or float16) among ", a.dtype(), ", ",
               b.dtype(), " and ", out.dtype());
  run<HalfStorage, C>(a, b, out, sixteen, op);
}

}  // namespace

Tensor binary16(backend::BinaryOp op, const Tensor& a, const Tensor& b, DType out_dtype) {
  Tensor out = empty(a.shape(), {.dtype = out_dtype});
  const char* name = op == backend::BinaryOp::Add ? "16-bit add" : "16-bit mul";
  detail::CpuOpScope scope(name);
  const DType sixteen = a.dtype() != DType::Float32 ? a.dtype() : b.dtype() != DType::Float32 ? b.dtype() : out_dtype;
  switch (op) {
    case backend::BinaryOp::Add: run_op<backend::BinaryOp::Add>(a, b, out, sixteen, name); break;
    case backend::BinaryOp::Mul: run_op<backend::BinaryOp::Mul>(a, b, out, sixteen, name); break;
    default: STRATA_FAIL("16-bit binary op: code ", static_cast<int>(op), " has no 16-bit kernel (add or mul)");
  }
  return out;
}

}  // namespace strata::cpu
