#include "elementwise.h"

#include <cmath>

#include "dtype_dispatch.h"
#include "strata/tensor/factory.h"

namespace strata::cpu {
namespace {

constexpr int64_t kParallelThreshold = 32768;

template <class T>
inline T apply_binary(BinaryOp op, T x, T y) {
  switch (op) {
    case BinaryOp::Add: return x + y;
    case BinaryOp::Sub: return x - y;
    case BinaryOp::Mul: return x * y;
    case BinaryOp::Div: return x / y;
  }
  return T{};
}

// Runs f(out_offset, a_offset, b_offset, n, a_stride, b_stride) over rows of `shape`, where
// out is contiguous and a, b have the given (broadcast) strides.
template <class F>
void for_each_row3(const Shape& shape, const Strides& sa, const Strides& sb, F&& f) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  if (nd == 0) {
    f(int64_t{0}, int64_t{0}, int64_t{0}, int64_t{1}, int64_t{0}, int64_t{0});
    return;
  }
  const int64_t inner = shape[nd - 1];
  int64_t rows = shape.numel() / std::max<int64_t>(inner, 1);
  if (inner == 0 || rows == 0) return;
#pragma omp parallel for if (rows * inner > kParallelThreshold) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t rem = r, oa = 0, ob = 0;
    for (int64_t d = nd - 2; d >= 0; --d) {
      int64_t i = rem % shape[d];
      rem /= shape[d];
      oa += i * sa[d];
      ob += i * sb[d];
    }
    f(r * inner, oa, ob, inner, sa[nd - 1], sb[nd - 1]);
  }
}

// Strides that read `t` as if broadcast to `shape` (0 on broadcast dimensions).
Strides broadcast_strides(const Tensor& t, const Shape& shape) {
  Strides s(shape.size(), 0);
  const size_t lead = shape.size() - t.shape().size();
  for (size_t i = lead; i < shape.size(); ++i) s[i] = t.shape()[i - lead] == 1 ? 0 : t.strides()[i - lead];
  return s;
}

}  // namespace

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, const char* name) {
  STRATA_CHECK(a.dtype() == b.dtype(), name, ": dtype mismatch, ", a.dtype(), " tensor of shape ", a.shape(), " and ",
               b.dtype(), " tensor of shape ", b.shape());
  Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out = empty(shape, {.dtype = a.dtype(), .device = a.device()});
  detail::dispatch_arith(a.dtype(), name, [&]<class T>() {
    T* o = out.data<T>();
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    const int64_t n = out.numel();
    if (a.shape() == b.shape() && a.is_contiguous() && b.is_contiguous()) {
      switch (op) {  // one loop per op so each vectorises
#define STRATA_FLAT_LOOP(OP, EXPR)                                     \
  case OP: {                                                           \
    _Pragma("omp parallel for simd if (n > kParallelThreshold)")       \
    for (int64_t i = 0; i < n; ++i) o[i] = EXPR;                       \
    break;                                                             \
  }
        STRATA_FLAT_LOOP(BinaryOp::Add, pa[i] + pb[i])
        STRATA_FLAT_LOOP(BinaryOp::Sub, pa[i] - pb[i])
        STRATA_FLAT_LOOP(BinaryOp::Mul, pa[i] * pb[i])
        STRATA_FLAT_LOOP(BinaryOp::Div, pa[i] / pb[i])
#undef STRATA_FLAT_LOOP
      }
      return;
    }
    for_each_row3(shape, broadcast_strides(a, shape), broadcast_strides(b, shape),
                  [&](int64_t oo, int64_t oa, int64_t ob, int64_t len, int64_t sa, int64_t sb) {
                    T* po = o + oo;
                    const T* xa = pa + oa;
                    const T* xb = pb + ob;
                    if (sa == 1 && sb == 1) {
                      for (int64_t i = 0; i < len; ++i) po[i] = apply_binary(op, xa[i], xb[i]);
                    } else if (sa == 1 && sb == 0) {
                      const T y = xb[0];
                      for (int64_t i = 0; i < len; ++i) po[i] = apply_binary(op, xa[i], y);
                    } else {
                      for (int64_t i = 0; i < len; ++i) po[i] = apply_binary(op, xa[i * sa], xb[i * sb]);
                    }
                  });
  });
  return out;
}

Tensor unary(UnaryOp op, const Tensor& a_in, double param, const char* name) {
  Tensor a = a_in.contiguous();
  Tensor out = empty(a.shape(), {.dtype = a.dtype(), .device = a.device()});
  const bool needs_float = op == UnaryOp::Exp || op == UnaryOp::Log || op == UnaryOp::Sqrt || op == UnaryOp::Tanh ||
                           op == UnaryOp::Pow;
  auto run = [&]<class T>() {
    T* o = out.data<T>();
    const T* x = a.data<T>();
    const int64_t n = a.numel();
    const T p = static_cast<T>(param);
    switch (op) {
#define STRATA_UNARY_LOOP(OP, EXPR)                                    \
  case OP: {                                                           \
    _Pragma("omp parallel for simd if (n > kParallelThreshold)")       \
    for (int64_t i = 0; i < n; ++i) o[i] = EXPR;                       \
    break;                                                             \
  }
      STRATA_UNARY_LOOP(UnaryOp::Neg, -x[i])
      STRATA_UNARY_LOOP(UnaryOp::Exp, static_cast<T>(std::exp(x[i])))
      STRATA_UNARY_LOOP(UnaryOp::Log, static_cast<T>(std::log(x[i])))
      STRATA_UNARY_LOOP(UnaryOp::Sqrt, static_cast<T>(std::sqrt(x[i])))
      STRATA_UNARY_LOOP(UnaryOp::Tanh, static_cast<T>(std::tanh(x[i])))
      STRATA_UNARY_LOOP(UnaryOp::Pow, static_cast<T>(std::pow(x[i], p)))
      STRATA_UNARY_LOOP(UnaryOp::AddScalar, x[i] + p)
      STRATA_UNARY_LOOP(UnaryOp::MulScalar, x[i] * p)
#undef STRATA_UNARY_LOOP
    }
  };
  if (needs_float) {
    detail::dispatch_floating(a.dtype(), name, run);
  } else {
    detail::dispatch_arith(a.dtype(), name, run);
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
    // Strided self: the row walker's "out" offset assumes contiguity, so walk self's own
    // strides as the first operand and write back through it.
    for_each_row3(shape, self.strides(), broadcast_strides(other, shape),
                  [&](int64_t, int64_t os, int64_t oo, int64_t len, int64_t ss, int64_t so) {
                    for (int64_t i = 0; i < len; ++i) s[os + i * ss] += al * o[oo + i * so];
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
