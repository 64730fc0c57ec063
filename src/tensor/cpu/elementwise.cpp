#include "elementwise.h"

#include <cmath>
#include <type_traits>

#include "broadcast_map.h"
#include "common/elementwise.h"
#include "dtype_dispatch.h"
#include "strata/tensor/factory.h"

namespace strata::cpu {

namespace k = strata_kernels;


Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, const char* name) {
  Tensor out = empty(broadcast_shapes(a.shape(), b.shape(), name), {.dtype = a.dtype(), .device = a.device()});
  auto run = [&]<class T>() {
    // One loop per op, each with the op inlined, so each vectorises.
    switch (op) {
      case BinaryOp::Add: return map_broadcast<T, T, T>(out, [](T x, T y) { return x + y; }, a, b);
      case BinaryOp::Sub: return map_broadcast<T, T, T>(out, [](T x, T y) { return x - y; }, a, b);
      case BinaryOp::Mul: return map_broadcast<T, T, T>(out, [](T x, T y) { return x * y; }, a, b);
      case BinaryOp::Div: return map_broadcast<T, T, T>(out, [](T x, T y) { return x / y; }, a, b);
      case BinaryOp::Minimum: return map_broadcast<T, T, T>(out, [](T x, T y) { return k::minimum_value(x, y); }, a, b);
      case BinaryOp::Maximum: return map_broadcast<T, T, T>(out, [](T x, T y) { return k::maximum_value(x, y); }, a, b);
      case BinaryOp::Pow:
        if constexpr (std::is_floating_point_v<T>) {
          return map_broadcast<T, T, T>(out, [](T x, T y) { return static_cast<T>(std::pow(x, y)); }, a, b);
        }
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
    auto map = [&](auto f) { map_broadcast<T, T>(out, f, a); };
    switch (op) {
      case UnaryOp::Neg: return map([](T x) { return -x; });
      case UnaryOp::Abs: return map([](T x) { return k::abs_value(x); });
      case UnaryOp::AddScalar: return map([tp](T x) { return x + tp; });
      case UnaryOp::MulScalar: return map([tp](T x) { return x * tp; });
      case UnaryOp::Clamp: return map([tp, tq](T x) { return k::clamp_value(x, tp, tq); });
      default: break;
    }
    if constexpr (std::is_floating_point_v<T>) {
      switch (op) {
        case UnaryOp::Exp: return map([](T x) { return static_cast<T>(std::exp(x)); });
        case UnaryOp::Log: return map([](T x) { return static_cast<T>(std::log(x)); });
        case UnaryOp::Sqrt: return map([](T x) { return static_cast<T>(std::sqrt(x)); });
        case UnaryOp::Rsqrt: return map([](T x) { return k::rsqrt_value(x); });
        case UnaryOp::Tanh: return map([](T x) { return static_cast<T>(std::tanh(x)); });
        case UnaryOp::Sigmoid: return map([](T x) { return k::sigmoid(x); });
        case UnaryOp::Silu: return map([](T x) { return k::silu(x); });
        case UnaryOp::Pow: return map([tp](T x) { return static_cast<T>(std::pow(x, tp)); });
        default: break;
      }
    }
  };
  const bool arith = op == UnaryOp::Neg || op == UnaryOp::Abs || op == UnaryOp::AddScalar ||
                     op == UnaryOp::MulScalar || op == UnaryOp::Clamp;
  if (arith) {
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
