#include "backend/cpu/elementwise.h"

#include <cmath>
#include <type_traits>

#include "backend/cpu/broadcast_map.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/common/elementwise.h"
#include "tensor/dtype_dispatch.h"

namespace strata::cpu {

namespace k = strata_kernels;

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, const char* name) {
  Tensor out = empty(broadcast_shapes(a.shape(), b.shape(), name), {.dtype = a.dtype(), .device = a.device()});
  auto run = [&]<class T>() {
    // One loop per op, each with its functor inlined, so each vectorises.
    auto map = [&]<BinaryOp C>() { map_broadcast<T, T, T>(out, k::BinaryFn<T, C>{}, a, b); };
    switch (op) {
      case BinaryOp::Add: return map.template operator()<BinaryOp::Add>();
      case BinaryOp::Sub: return map.template operator()<BinaryOp::Sub>();
      case BinaryOp::Mul: return map.template operator()<BinaryOp::Mul>();
      case BinaryOp::Div: return map.template operator()<BinaryOp::Div>();
      case BinaryOp::Minimum: return map.template operator()<BinaryOp::Minimum>();
      case BinaryOp::Maximum: return map.template operator()<BinaryOp::Maximum>();
      case BinaryOp::Pow:
        if constexpr (std::is_floating_point_v<T>) return map.template operator()<BinaryOp::Pow>();
        break;
    }
  };
  if (op == BinaryOp::Pow) {
    detail::dispatch_floating(a.dtype(), name, run);
  } else {
    detail::dispatch_arith(a.dtype(), name, run);
  }
  return out;
}

Tensor unary(UnaryOp op, const Tensor& a, const char* name, double p, double q) {
  Tensor out = empty(a.shape(), {.dtype = a.dtype(), .device = a.device()});
  auto run = [&]<class T>() {
    const T tp = detail::scalar_as<T>(p), tq = detail::scalar_as<T>(q);
    auto map = [&]<UnaryOp C>() { map_broadcast<T, T>(out, k::UnaryFn<T, C>{tp, tq}, a); };
    switch (op) {
      case UnaryOp::Neg: return map.template operator()<UnaryOp::Neg>();
      case UnaryOp::Abs: return map.template operator()<UnaryOp::Abs>();
      case UnaryOp::AddScalar: return map.template operator()<UnaryOp::AddScalar>();
      case UnaryOp::MulScalar: return map.template operator()<UnaryOp::MulScalar>();
      case UnaryOp::Clamp: return map.template operator()<UnaryOp::Clamp>();
      default: break;
    }
    if constexpr (std::is_floating_point_v<T>) {
      switch (op) {
        case UnaryOp::Exp: return map.template operator()<UnaryOp::Exp>();
        case UnaryOp::Log: return map.template operator()<UnaryOp::Log>();
        case UnaryOp::Sqrt: return map.template operator()<UnaryOp::Sqrt>();
        case UnaryOp::Rsqrt: return map.template operator()<UnaryOp::Rsqrt>();
        case UnaryOp::Tanh: return map.template operator()<UnaryOp::Tanh>();
        case UnaryOp::Sigmoid: return map.template operator()<UnaryOp::Sigmoid>();
        case UnaryOp::Silu: return map.template operator()<UnaryOp::Silu>();
        case UnaryOp::Pow: return map.template operator()<UnaryOp::Pow>();
        case UnaryOp::Gelu: return map.template operator()<UnaryOp::Gelu>();
        case UnaryOp::Relu: return map.template operator()<UnaryOp::Relu>();
        default: break;
      }
    }
  };
  if (k::is_arithmetic(op)) {
    detail::dispatch_arith(a.dtype(), name, run);
  } else {
    detail::dispatch_floating(a.dtype(), name, run);
  }
  return out;
}

void add_inplace(const Tensor& self, const Tensor& other, double alpha) {
  STRATA_CHECK(self.dtype() == other.dtype(), "add_: dtype mismatch, ", self.dtype(), " and ", other.dtype());
  Shape shape = broadcast_shapes(self.shape(), other.shape(), "add_");
  STRATA_CHECK(shape == self.shape(), "add_: cannot broadcast ", other.shape(), " into ", self.shape());
  detail::dispatch_arith(self.dtype(), "add_", [&]<class T>() {
    T* s = static_cast<T*>(self.raw_data());
    const T* o = other.data<T>();
    const T al = static_cast<T>(alpha);
    if (self.is_contiguous() && other.is_contiguous() && other.shape() == self.shape()) {
      const int64_t n = self.numel();
      if (alpha == 1.0) {
#pragma omp parallel for simd if (n > kParallelThreshold)
        for (int64_t i = 0; i < n; ++i) s[i] += o[i];
      } else {
#pragma omp parallel for simd if (n > kParallelThreshold)
        for (int64_t i = 0; i < n; ++i) s[i] += al * o[i];
      }
      return;
    }
    // Strided self: walk self's own strides as the first operand and write back through it.
    for_each_row<2>(shape, {self.strides(), broadcast_strides(other, shape)},
                    [&](int64_t, const auto& off, int64_t len, const auto& step) {
                      for (int64_t i = 0; i < len; ++i) s[off[0] + i * step[0]] += al * o[off[1] + i * step[1]];
                    });
  });
}

void mul_inplace(const Tensor& self, double value) {
  detail::dispatch_arith(self.dtype(), "mul_", [&]<class T>() {
    STRATA_CHECK(self.is_contiguous(), "mul_: tensor of shape ", self.shape(), " is not contiguous");
    T* s = self.data<T>();
    const T v = static_cast<T>(value);
    const int64_t n = self.numel();
#pragma omp parallel for simd if (n > kParallelThreshold)
    for (int64_t i = 0; i < n; ++i) s[i] *= v;
  });
}

}  // namespace strata::cpu
