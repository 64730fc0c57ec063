// Backward kernels of the elementwise ops: grad times the local derivative in one pass.
#include <cmath>

#include "broadcast_map.h"
#include "common/elementwise.h"
#include "dtype_dispatch.h"
#include "elementwise.h"
#include "strata/tensor/factory.h"

namespace strata::cpu {

namespace k = strata_kernels;

Tensor unary_grad(UnaryGradOp op, const Tensor& grad, const Tensor& saved, const char* name, double p, double q) {
  Tensor out = empty(saved.shape(), {.dtype = saved.dtype(), .device = saved.device()});
  detail::dispatch_floating(saved.dtype(), name, [&]<class T>() {
    const T tp = static_cast<T>(p), tq = static_cast<T>(q);
    auto map = [&](auto f) { map_broadcast<T, T, T>(out, f, grad, saved); };
    switch (op) {
      case UnaryGradOp::Abs: return map([](T g, T x) { return g * k::abs_grad(x); });
      case UnaryGradOp::Exp: return map([](T g, T e) { return g * e; });
      case UnaryGradOp::Log: return map([](T g, T x) { return g / x; });
      case UnaryGradOp::Sqrt: return map([](T g, T r) { return g * k::sqrt_grad_from_output(r); });
      case UnaryGradOp::Tanh: return map([](T g, T t) { return g * k::tanh_grad_from_output(t); });
      case UnaryGradOp::Sigmoid: return map([](T g, T s) { return g * k::sigmoid_grad_from_output(s); });
      case UnaryGradOp::Silu: return map([](T g, T x) { return g * k::silu_grad(x); });
      case UnaryGradOp::Rsqrt: return map([](T g, T r) { return g * k::rsqrt_grad_from_output(r); });
      case UnaryGradOp::Clamp: return map([tp, tq](T g, T x) { return g * k::clamp_grad(x, tp, tq); });
      case UnaryGradOp::Pow: return map([tp](T g, T x) { return g * k::pow_grad_base(x, tp); });
    }
  });
  return out;
}

Tensor binary_grad(BinaryGradOp op, const Tensor& grad, const Tensor& a, const Tensor& b, const char* name) {
  Tensor out = empty(grad.shape(), {.dtype = grad.dtype(), .device = grad.device()});
  detail::dispatch_floating(grad.dtype(), name, [&]<class T>() {
    auto map = [&](auto f) { map_broadcast<T, T, T, T>(out, f, grad, a, b); };
    switch (op) {
      case BinaryGradOp::MinimumA: return map([](T g, T x, T y) { return g * k::minimum_share(x, y); });
      case BinaryGradOp::MinimumB: return map([](T g, T x, T y) { return g * k::minimum_share(y, x); });
      case BinaryGradOp::MaximumA: return map([](T g, T x, T y) { return g * k::minimum_share(y, x); });
      case BinaryGradOp::MaximumB: return map([](T g, T x, T y) { return g * k::minimum_share(x, y); });
      case BinaryGradOp::PowBase: return map([](T g, T x, T y) { return g * k::pow_grad_base(x, y); });
      case BinaryGradOp::PowExponent: return map([](T g, T x, T y) { return g * k::pow_grad_exponent(x, y); });
    }
  });
  return out;
}

}  // namespace strata::cpu
