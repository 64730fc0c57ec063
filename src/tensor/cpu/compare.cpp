// Comparisons (to Bool) and selections by a Bool condition.
#include "broadcast_map.h"
#include "common/elementwise.h"
#include "dtype_dispatch.h"
#include "elementwise.h"
#include "strata/tensor/factory.h"

namespace strata::cpu {

namespace k = strata_kernels;

Tensor compare(CompareOp op, const Tensor& a, const Tensor& b, const char* name) {
  Tensor out = empty(broadcast_shapes(a.shape(), b.shape(), name), {.dtype = DType::Bool, .device = a.device()});
  detail::dispatch_arith_or_bool(a.dtype(), name, [&]<class T>() {
    auto map = [&](auto f) { map_broadcast<bool, T, T>(out, f, a, b); };
    switch (op) {
      case CompareOp::Eq: return map([](T x, T y) { return x == y; });
      case CompareOp::Ne: return map([](T x, T y) { return x != y; });
      case CompareOp::Lt: return map([](T x, T y) { return x < y; });
      case CompareOp::Le: return map([](T x, T y) { return x <= y; });
      case CompareOp::Gt: return map([](T x, T y) { return x > y; });
      case CompareOp::Ge: return map([](T x, T y) { return x >= y; });
    }
  });
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, const Shape& shape, const char* name) {
  Tensor out = empty(shape, {.dtype = a.dtype(), .device = a.device()});
  detail::dispatch_arith_or_bool(a.dtype(), name, [&]<class T>() {
    map_broadcast<T, bool, T, T>(out, [](bool c, T x, T y) { return k::select_value(c, x, y); }, cond, a, b);
  });
  return out;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value, const Shape& shape, const char* name) {
  Tensor out = empty(shape, {.dtype = x.dtype(), .device = x.device()});
  detail::dispatch_arith_or_bool(x.dtype(), name, [&]<class T>() {
    const T v = detail::scalar_as<T>(value);
    map_broadcast<T, T, bool>(out, [v](T y, bool m) { return k::select_value(m, v, y); }, x, mask);
  });
  return out;
}

}  // namespace strata::cpu
