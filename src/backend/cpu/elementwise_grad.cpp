// Backward kernels of the elementwise ops: grad times the local derivative in one pass.
#include <cmath>

#include "backend/cpu/broadcast_map.h"
#include "backend/cpu/elementwise.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/common/elementwise.h"
#include "tensor/dtype_dispatch.h"

namespace strata::cpu {

namespace k = strata_kernels;

Tensor unary_grad(UnaryGradOp op, const Tensor& grad, const Tensor& saved, const char* name, double p, double q) {
  Tensor out = empty(saved.shape(), {.dtype = saved.dtype(), .device = saved.device()});
  detail::dispatch_floating(saved.dtype(), name, [&]<class T>() {
    const T tp = static_cast<T>(p), tq = static_cast<T>(q);
    auto map = [&]<UnaryGradOp C>() { map_broadcast<T, T, T>(out, k::UnaryGradFn<T, C>{tp, tq}, grad, saved); };
    switch (op) {
      case UnaryGradOp::Abs: return map.template operator()<UnaryGradOp::Abs>();
      case UnaryGradOp::Exp: return map.template operator()<UnaryGradOp::Exp>();
      case UnaryGradOp::Log: return map.template operator()<UnaryGradOp::Log>();
      case UnaryGradOp::Sqrt: return map.template operator()<UnaryGradOp::Sqrt>();
      case UnaryGradOp::Tanh: return map.template operator()<UnaryGradOp::Tanh>();
      case UnaryGradOp::Sigmoid: return map.template operator()<UnaryGradOp::Sigmoid>();
      case UnaryGradOp::Silu: return map.template operator()<UnaryGradOp::Silu>();
      case UnaryGradOp::Rsqrt: return map.template operator()<UnaryGradOp::Rsqrt>();
      case UnaryGradOp::Clamp: return map.template operator()<UnaryGradOp::Clamp>();
      case UnaryGradOp::Pow: return map.template operator()<UnaryGradOp::Pow>();
      case UnaryGradOp::Gelu: return map.template operator()<UnaryGradOp::Gelu>();
      case UnaryGradOp::Relu: return map.template operator()<UnaryGradOp::Relu>();
    }
  });
  return out;
}

Tensor binary_grad(BinaryGradOp op, const Tensor& grad, const Tensor& a, const Tensor& b, const char* name) {
  Tensor out = empty(grad.shape(), {.dtype = grad.dtype(), .device = grad.device()});
  detail::dispatch_floating(grad.dtype(), name, [&]<class T>() {
    auto map = [&]<BinaryGradOp C>() { map_broadcast<T, T, T, T>(out, k::BinaryGradFn<T, C>{}, grad, a, b); };
    switch (op) {
      case BinaryGradOp::MinimumA: return map.template operator()<BinaryGradOp::MinimumA>();
      case BinaryGradOp::MinimumB: return map.template operator()<BinaryGradOp::MinimumB>();
      case BinaryGradOp::MaximumA: return map.template operator()<BinaryGradOp::MaximumA>();
      case BinaryGradOp::MaximumB: return map.template operator()<BinaryGradOp::MaximumB>();
      case BinaryGradOp::PowBase: return map.template operator()<BinaryGradOp::PowBase>();
      case BinaryGradOp::PowExponent: return map.template operator()<BinaryGradOp::PowExponent>();
    }
  });
  return out;
}

}  // namespace strata::cpu
