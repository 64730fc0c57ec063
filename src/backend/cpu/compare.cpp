// Comparisons (to Bool) and selections by a Bool condition: common/compare_ops.h's
// functors, which the CUDA kernels (kernels/cuda/compare.cu) run too.
#include "backend/cpu/broadcast_map.h"
#include "backend/cpu/elementwise.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/common/compare_ops.h"
#include "tensor/dtype_dispatch.h"

namespace strata::cpu {

namespace k = strata_kernels;

Tensor compare(CompareOp op, const Tensor& a, const Tensor& b, const char* name) {
  Tensor out = empty(broadcast_shapes(a.shape(), b.shape(), name), {.dtype = DType::Bool, .device = a.device()});
  detail::dispatch_arith_or_bool(a.dtype(), name, [&]<class T>() {
    auto map = [&]<CompareOp C>() { map_broadcast<bool, T, T>(out, k::CompareFn<T, C>{}, a, b); };
    switch (op) {
      case CompareOp::Eq: return map.template operator()<CompareOp::Eq>();
      case CompareOp::Ne: return map.template operator()<CompareOp::Ne>();
      case CompareOp::Lt: return map.template operator()<CompareOp::Lt>();
      case CompareOp::Le: return map.template operator()<CompareOp::Le>();
      case CompareOp::Gt: return map.template operator()<CompareOp::Gt>();
      case CompareOp::Ge: return map.template operator()<CompareOp::Ge>();
    }
  });
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, const Shape& shape, const char* name) {
  Tensor out = empty(shape, {.dtype = a.dtype(), .device = a.device()});
  detail::dispatch_arith_or_bool(a.dtype(), name,
                                 [&]<class T>() { map_broadcast<T, bool, T, T>(out, k::WhereFn<T>{}, cond, a, b); });
  return out;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value, const Shape& shape, const char* name) {
  Tensor out = empty(shape, {.dtype = x.dtype(), .device = x.device()});
  detail::dispatch_arith_or_bool(x.dtype(), name, [&]<class T>() {
    map_broadcast<T, T, bool>(out, k::MaskedFillFn<T>{detail::scalar_as<T>(value)}, x, mask);
  });
  return out;
}

}  // namespace strata::cpu
