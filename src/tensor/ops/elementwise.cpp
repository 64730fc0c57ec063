#include "strata/tensor/ops/elementwise.h"

#include <cmath>

#include "../cpu/elementwise.h"
#include "../device_dispatch.h"
#include "strata/autograd/function.h"
#include "strata/autograd/grad_mode.h"
#include "strata/tensor/ops/reduce.h"

namespace strata {

using autograd::BackwardContext;
using cpu::BinaryOp;
using cpu::UnaryOp;

namespace {

// The device switches of the elementwise kernels; `name` is the public op.
Tensor binary_op(BinaryOp op, const Tensor& a, const Tensor& b, const char* name) {
  const Device device = detail::common_device(name, {{"a", a}, {"b", b}});
  return detail::on_device(name, device, [&] { return cpu::binary(op, a, b, name); });
}

Tensor unary_op(UnaryOp op, const Tensor& a, double param, const char* name) {
  return detail::on_device(name, a.device(), [&] { return cpu::unary(op, a, param, name); });
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary_op(BinaryOp::Add, a, b, "add");
  if (autograd::needs_grad({a, b})) {
    autograd::record("AddBackward", {a, b}, {out}, [sa = a.shape(), sb = b.shape()](BackwardContext& ctx) {
      const Tensor& g = ctx.grad();
      return std::vector<Tensor>{ctx.needs(0) ? sum_to(g, sa) : Tensor(), ctx.needs(1) ? sum_to(g, sb) : Tensor()};
    });
  }
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary_op(BinaryOp::Sub, a, b, "sub");
  if (autograd::needs_grad({a, b})) {
    autograd::record("SubBackward", {a, b}, {out}, [sa = a.shape(), sb = b.shape()](BackwardContext& ctx) {
      const Tensor& g = ctx.grad();
      return std::vector<Tensor>{ctx.needs(0) ? sum_to(g, sa) : Tensor(), ctx.needs(1) ? sum_to(neg(g), sb) : Tensor()};
    });
  }
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_op(BinaryOp::Mul, a, b, "mul");
  if (autograd::needs_grad({a, b})) {
    autograd::record("MulBackward", {a, b}, {out}, [a = a.detach(), b = b.detach()](BackwardContext& ctx) {
      const Tensor& g = ctx.grad();
      return std::vector<Tensor>{ctx.needs(0) ? sum_to(mul(g, b), a.shape()) : Tensor(),
                                 ctx.needs(1) ? sum_to(mul(g, a), b.shape()) : Tensor()};
    });
  }
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary_op(BinaryOp::Div, a, b, "div");
  if (autograd::needs_grad({a, b})) {
    autograd::record("DivBackward", {a, b}, {out}, [a = a.detach(), b = b.detach()](BackwardContext& ctx) {
      const Tensor& g = ctx.grad();
      Tensor ga, gb;
      if (ctx.needs(0)) ga = sum_to(div(g, b), a.shape());
      if (ctx.needs(1)) gb = sum_to(neg(div(mul(g, a), mul(b, b))), b.shape());
      return std::vector<Tensor>{ga, gb};
    });
  }
  return out;
}

Tensor add(const Tensor& a, double b) {
  Tensor out = unary_op(UnaryOp::AddScalar, a, b, "add");
  if (autograd::needs_grad({a})) {
    autograd::record("AddScalarBackward", {a}, {out}, [](BackwardContext& ctx) { return std::vector<Tensor>{ctx.grad()}; });
  }
  return out;
}

Tensor mul(const Tensor& a, double b) {
  Tensor out = unary_op(UnaryOp::MulScalar, a, b, "mul");
  if (autograd::needs_grad({a})) {
    autograd::record("MulScalarBackward", {a}, {out}, [b](BackwardContext& ctx) {
      return std::vector<Tensor>{mul(ctx.grad(), b)};
    });
  }
  return out;
}

Tensor neg(const Tensor& a) {
  Tensor out = unary_op(UnaryOp::Neg, a, 0.0, "neg");
  if (autograd::needs_grad({a})) {
    autograd::record("NegBackward", {a}, {out}, [](BackwardContext& ctx) { return std::vector<Tensor>{neg(ctx.grad())}; });
  }
  return out;
}

Tensor exp(const Tensor& a) {
  Tensor out = unary_op(UnaryOp::Exp, a, 0.0, "exp");
  if (autograd::needs_grad({a})) {
    autograd::record("ExpBackward", {a}, {out}, [out = out.detach()](BackwardContext& ctx) {
      return std::vector<Tensor>{mul(ctx.grad(), out)};
    });
  }
  return out;
}

Tensor log(const Tensor& a) {
  Tensor out = unary_op(UnaryOp::Log, a, 0.0, "log");
  if (autograd::needs_grad({a})) {
    autograd::record("LogBackward", {a}, {out}, [a = a.detach()](BackwardContext& ctx) {
      return std::vector<Tensor>{div(ctx.grad(), a)};
    });
  }
  return out;
}

Tensor sqrt(const Tensor& a) {
  Tensor out = unary_op(UnaryOp::Sqrt, a, 0.0, "sqrt");
  if (autograd::needs_grad({a})) {
    autograd::record("SqrtBackward", {a}, {out}, [out = out.detach()](BackwardContext& ctx) {
      return std::vector<Tensor>{div(mul(ctx.grad(), 0.5), out)};
    });
  }
  return out;
}

Tensor tanh(const Tensor& a) {
  Tensor out = unary_op(UnaryOp::Tanh, a, 0.0, "tanh");
  if (autograd::needs_grad({a})) {
    autograd::record("TanhBackward", {a}, {out}, [out = out.detach()](BackwardContext& ctx) {
      // d tanh = 1 - tanh^2
      return std::vector<Tensor>{mul(ctx.grad(), add(neg(mul(out, out)), 1.0))};
    });
  }
  return out;
}

Tensor pow(const Tensor& a, double exponent) {
  Tensor out = unary_op(UnaryOp::Pow, a, exponent, "pow");
  if (autograd::needs_grad({a})) {
    autograd::record("PowBackward", {a}, {out}, [a = a.detach(), exponent](BackwardContext& ctx) {
      return std::vector<Tensor>{mul(mul(ctx.grad(), pow(a, exponent - 1.0)), exponent)};
    });
  }
  return out;
}

Tensor& add_(Tensor& self, const Tensor& other, double alpha) {
  STRATA_CHECK(!(grad_enabled() && self.requires_grad()),
               "add_: in-place write to a tensor that requires grad; wrap it in NoGradGuard");
  const Device device = detail::common_device("add_", {{"self", self}, {"other", other}});
  detail::on_device("add_", device, [&] { cpu::add_inplace(self, other, alpha); });
  return self;
}

Tensor& mul_(Tensor& self, double value) {
  STRATA_CHECK(!(grad_enabled() && self.requires_grad()),
               "mul_: in-place write to a tensor that requires grad; wrap it in NoGradGuard");
  detail::on_device("mul_", self.device(), [&] { cpu::mul_inplace(self, value); });
  return self;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  STRATA_CHECK(a.shape() == b.shape(), "max_abs_diff: shapes ", a.shape(), " and ", b.shape(), " differ");
  std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < va.size(); ++i) {
    double d = std::fabs(va[i] - vb[i]);
    if (std::isnan(d)) return d;
    m = std::max(m, d);
  }
  return m;
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  STRATA_CHECK(a.shape() == b.shape(), "allclose: shapes ", a.shape(), " and ", b.shape(), " differ");
  std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
  for (size_t i = 0; i < va.size(); ++i) {
    if (!(std::fabs(va[i] - vb[i]) <= atol + rtol * std::fabs(vb[i]))) return false;
  }
  return true;
}

}  // namespace strata
