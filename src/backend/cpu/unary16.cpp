#include "backend/cpu/unary16.h"

#include "backend/cpu/multiversion.h"
#include "backend/cpu/row_storage.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/common/unary16.h"

namespace strata::cpu {
namespace {

using strata_kernels::Bf16Storage;
using strata_kernels::HalfStorage;

// GELU and SiLU cost tens of flops an element: threads pay off early (as cpu/activation.cpp).
constexpr int64_t kParallelThreshold = 8192;

template <class F>
STRATA_MULTIVERSION void for_each_n(int64_t n, F f) {
#pragma omp parallel for simd if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) f(i);
}

// f.template operator()<S>() for x's 16-bit storage type.
template <class F>
void dispatch_16bit(DType dtype, const char* op, F&& f) {
  detail::CpuOpScope scope(op);
  switch (dtype) {
    case DType::BFloat16: return f.template operator()<Bf16Storage>();
    case DType::Float16: return f.template operator()<HalfStorage>();
    default: break;
  }
  STRATA_FAIL(op, ": dtype ", dtype, " is not 16-bit (bfloat16 or float16)");
}

}  // namespace

Tensor unary16(backend::UnaryOp op, const Tensor& x) {
  Tensor out = empty(x.shape(), {.dtype = x.dtype()});
  dispatch_16bit(x.dtype(), "16-bit activation", [&]<class S>() {
    const S* in = storage<const S>(x);
    S* y = storage<S>(out);
    switch (op) {
      case backend::UnaryOp::Gelu:
        return for_each_n(x.numel(), strata_kernels::Unary16<S, backend::UnaryOp::Gelu>{in, y, 0, 0});
      case backend::UnaryOp::Silu:
        return for_each_n(x.numel(), strata_kernels::Unary16<S, backend::UnaryOp::Silu>{in, y, 0, 0});
      default: STRATA_FAIL("16-bit activation: op ", static_cast<int>(op), " has no 16-bit kernel (gelu or silu)");
    }
  });
  return out;
}

Tensor unary_grad16(backend::UnaryGradOp op, const Tensor& grad, const Tensor& saved) {
  Tensor dx = empty(saved.shape(), {.dtype = saved.dtype()});
  dispatch_16bit(saved.dtype(), "16-bit activation backward", [&]<class S>() {
    const S* g = storage<const S>(grad);
    const S* s = storage<const S>(saved);
    S* out = storage<S>(dx);
    switch (op) {
      case backend::UnaryGradOp::Gelu:
        return for_each_n(saved.numel(), strata_kernels::UnaryGrad16<S, backend::UnaryGradOp::Gelu>{g, s, out, 0, 0});
      case backend::UnaryGradOp::Silu:
        return for_each_n(saved.numel(), strata_kernels::UnaryGrad16<S, backend::UnaryGradOp::Silu>{g, s, out, 0, 0});
      default:
        STRATA_FAIL("16-bit activation backward: op ", static_cast<int>(op), " has no 16-bit kernel (gelu or silu)");
    }
  });
  return dx;
}

}  // namespace strata::cpu
