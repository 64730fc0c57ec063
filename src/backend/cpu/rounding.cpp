#include "backend/cpu/rounding.h"

#include "backend/cpu/broadcast_map.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/common/rounding_ops.h"
#include "tensor/dtype_dispatch.h"

namespace strata::cpu {

namespace k = strata_kernels;
using backend::ClassifyOp;
using backend::RoundingOp;

Tensor rounding(RoundingOp op, const Tensor& a, const char* name) {
  Tensor out = empty(a.shape(), {.dtype = a.dtype(), .device = a.device()});
  detail::dispatch_arith(a.dtype(), name, [&]<class T>() {
    // One loop per op, each with its functor inlined, so each vectorises.
    auto map = [&]<RoundingOp C>() { map_broadcast<T, T>(out, k::RoundingFn<T, C>{}, a); };
    switch (op) {
      case RoundingOp::Round: return map.template operator()<RoundingOp::Round>();
      case RoundingOp::Floor: return map.template operator()<RoundingOp::Floor>();
      case RoundingOp::Ceil: return map.template operator()<RoundingOp::Ceil>();
      case RoundingOp::Trunc: return map.template operator()<RoundingOp::Trunc>();
      case RoundingOp::Sign: return map.template operator()<RoundingOp::Sign>();
    }
  });
  return out;
}

Tensor classify(ClassifyOp op, const Tensor& a, const char* name) {
  Tensor out = empty(a.shape(), {.dtype = DType::Bool, .device = a.device()});
  detail::dispatch_arith_or_bool(a.dtype(), name, [&]<class T>() {
    auto map = [&]<ClassifyOp C>() { map_broadcast<bool, T>(out, k::ClassifyFn<T, C>{}, a); };
    switch (op) {
      case ClassifyOp::IsNan: return map.template operator()<ClassifyOp::IsNan>();
      case ClassifyOp::IsInf: return map.template operator()<ClassifyOp::IsInf>();
      case ClassifyOp::IsFinite: return map.template operator()<ClassifyOp::IsFinite>();
    }
  });
  return out;
}

}  // namespace strata::cpu
