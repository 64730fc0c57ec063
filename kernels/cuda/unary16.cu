// common/unary16.h's functors as grid-stride kernels: the per-element work the CPU's loop
// runs, on contiguous bfloat16/float16 data.
#include <stdint.h>

#include "cuda/for_each_n.cuh"
#include "strata_kernels/common/unary16.h"
#include "strata_kernels/elementwise.h"
#include "strata_kernels/unary16.h"

namespace {

using namespace strata_kernels;

// f(S{}) for the 16-bit storage type of `type`.
template <class F>
cudaError_t for_16bit_type(int32_t type, F&& f) {
  switch (type) {
    case STRATA_ELEMENT_BF16: return f(Bf16Storage{});
    case STRATA_ELEMENT_F16: return f(HalfStorage{});
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

extern "C" cudaError_t strata_unary16(int32_t op, int32_t type, const void* x, void* y, int64_t n, double p, double q,
                                      cudaStream_t s) {
  return for_16bit_type(type, [&](auto st) {
    using S = decltype(st);
    const S* in = static_cast<const S*>(x);
    S* out = static_cast<S*>(y);
    const float fp = static_cast<float>(p), fq = static_cast<float>(q);
    switch (static_cast<UnaryCode>(op)) {
      case UnaryCode::Gelu: return for_each_n(n, Unary16<S, UnaryCode::Gelu>{in, out, fp, fq}, s);
      case UnaryCode::Silu: return for_each_n(n, Unary16<S, UnaryCode::Silu>{in, out, fp, fq}, s);
      default: return cudaErrorInvalidValue;
    }
  });
}

extern "C" cudaError_t strata_unary_grad16(int32_t op, int32_t type, const void* grad, const void* saved, void* dx,
                                           int64_t n, double p, double q, cudaStream_t s) {
  return for_16bit_type(type, [&](auto st) {
    using S = decltype(st);
    const S* g = static_cast<const S*>(grad);
    const S* sv = static_cast<const S*>(saved);
    S* out = static_cast<S*>(dx);
    const float fp = static_cast<float>(p), fq = static_cast<float>(q);
    switch (static_cast<UnaryGradCode>(op)) {
      case UnaryGradCode::Gelu: return for_each_n(n, UnaryGrad16<S, UnaryGradCode::Gelu>{g, sv, out, fp, fq}, s);
      case UnaryGradCode::Silu: return for_each_n(n, UnaryGrad16<S, UnaryGradCode::Silu>{g, sv, out, fp, fq}, s);
      default: return cudaErrorInvalidValue;
    }
  });
}
