// common/binary16.h's functor as a grid-stride kernel, for each storage combination.
#include <stdint.h>

#include "cuda/for_each_n.cuh"
#include "strata_kernels/binary16.h"
#include "strata_kernels/common/binary16.h"
#include "strata_kernels/elementwise.h"

namespace {

using namespace strata_kernels;

// f(V{}) with V float (F32) or the 16-bit storage S.
template <class S, class F>
cudaError_t float_or(int32_t type, int32_t s_type, F&& f) {
  if (type == STRATA_ELEMENT_F32) return f(float{});
  return type == s_type ? f(S{}) : cudaErrorInvalidValue;
}

template <class S>
cudaError_t launch(int32_t op, int32_t s_type, int32_t a_type, int32_t b_type, int32_t out_type, const void* a,
                   const void* b, void* out, int64_t n, cudaStream_t s) {
  return float_or<S>(a_type, s_type, [&](auto av) {
    return float_or<S>(b_type, s_type, [&](auto bv) {
      return float_or<S>(out_type, s_type, [&](auto ov) -> cudaError_t {
        using A = decltype(av);
        using B = decltype(bv);
        using O = decltype(ov);
        const A* pa = static_cast<const A*>(a);
        const B* pb = static_cast<const B*>(b);
        O* po = static_cast<O*>(out);
        switch (static_cast<BinaryCode>(op)) {
          case BinaryCode::Add: return for_each_n(n, Binary16<A, B, O, BinaryCode::Add>{pa, pb, po}, s);
          case BinaryCode::Mul: return for_each_n(n, Binary16<A, B, O, BinaryCode::Mul>{pa, pb, po}, s);
          default: return cudaErrorInvalidValue;
        }
      });
    });
  });
}

}  // namespace

extern "C" cudaError_t strata_binary16(int32_t op, int32_t a_type, int32_t b_type, int32_t out_type, const void* a,
                                       const void* b, void* out, int64_t n, cudaStream_t s) {
  // The 16-bit code the operands use (any one of them that is not float32).
  const int32_t s_type = a_type != STRATA_ELEMENT_F32 ? a_type : b_type != STRATA_ELEMENT_F32 ? b_type : out_type;
  switch (s_type) {
    case STRATA_ELEMENT_BF16: return launch<Bf16Storage>(op, s_type, a_type, b_type, out_type, a, b, out, n, s);
    case STRATA_ELEMENT_F16: return launch<HalfStorage>(op, s_type, a_type, b_type, out_type, a, b, out, n, s);
    default: return cudaErrorInvalidValue;
  }
}
