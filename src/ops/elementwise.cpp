#include "strata/ops/elementwise.h"

#include <cmath>

#include "backend/cuda/cuda_ops.h"
#include "backend/dispatch/device_dispatch.h"
#include "ops/autocast_cast.h"
#include "ops/binary16.h"
#include "ops/elementwise_common.h"
#include "strata/autograd/function.h"
#include "strata/autograd/grad_mode.h"
#include "strata/ops/autocast.h"
#include "strata/ops/reduce.h"
#include "strata/tensor/factory.h"

namespace strata {

using autograd::BackwardContext;
using backend::BinaryGradOp;
using backend::BinaryOp;
using backend::UnaryOp;

namespace detail {

Device check_binary(const char* name, const Tensor& a, const Tensor& b) {
  STRATA_CHECK(a.defined() && b.defined(), name, ": ", a.defined() ? "b" : "a", " is undefined");
  const Device device = common_device(name, {{"a", a}, {"b", b}});
  STRATA_CHECK(a.dtype() == b.dtype(), name, ": dtype mismatch, ", a.dtype(), " tensor of shape ", a.shape(), " and ",
               b.dtype(), " tensor of shape ", b.shape());
  broadcast_shapes(a.shape(), b.shape(), name);
  return device;
}

void check_not_bool(const char* name, const Tensor& t) {
  STRATA_CHECK(t.dtype() != DType::Bool, name, ": bool tensor of shape ", t.shape(),
               " has no arithmetic (convert it with .to(), e.g. to float32)");
}

Tensor binary_op(BinaryOp op, const Tensor& a, const Tensor& b, const char* name) {
  const Device device = check_binary(name, a, b);
  check_not_bool(name, a);
  return on_device(
      name, device, [&] { return cpu::binary(op, a, b, name); }, [&] { return cuda_ops::binary(op, a, b, name); });
}

Tensor unary_op(UnaryOp op, const Tensor& a, const char* name, double p, double q) {
  STRATA_CHECK(a.defined(), name, ": input is undefined");
  check_not_bool(name, a);
  return on_device(
      name, a.device(), [&] { return cpu::unary(op, a, name, p, q); },
      [&] { return cuda_ops::unary(op, a, name, p, q); });
}

Tensor unary_grad_op(backend::UnaryGradOp op, const Tensor& grad, const Tensor& saved, const char* name, double p,
                     double q) {
  return on_device(
      name, saved.device(), [&] { return cpu::unary_grad(op, grad, saved, name, p, q); },
      [&] { return cuda_ops::unary_grad(op, grad, saved, name, p, q); });
}

Tensor binary_grad_op(BinaryGradOp op, const Tensor& grad, const Tensor& a, const Tensor& b, const char* name) {
  return on_device(
      name, grad.device(), [&] { return cpu::binary_grad(op, grad, a, b, name); },
      [&] { return cuda_ops::binary_grad(op, grad, a, b, name); });
}

}  // namespace detail

namespace {

// A binary op whose gradients are grad_a(g, a, b) and grad_b(g, a, b), each summed back to
// its input's shape.
Tensor binary_with_grads(BinaryOp op, BinaryGradOp grad_a, BinaryGradOp grad_b, const Tensor& a, const Tensor& b,
                         const char* name, const char* node) {
  Tensor out = detail::binary_op(op, a, b, name);
  if (autograd::needs_grad({a, b})) {
    Tensor sa = a.detach(), sb = b.detach();
    autograd::record(node, {a, b}, {out}, {sa, sb}, [a = sa, b = sb, grad_a, grad_b, node](BackwardContext& ctx) {
      const Tensor& g = ctx.grad();
      Tensor ga, gb;
      if (ctx.needs(0)) ga = sum_to(detail::binary_grad_op(grad_a, g, a, b, node), a.shape());
      if (ctx.needs(1)) gb = sum_to(detail::binary_grad_op(grad_b, g, a, b, node), b.shape());
      return std::vector<Tensor>{ga, gb};
    });
  }
  return out;
}

// add or mul with a 16-bit operand: both of one 16-bit dtype give that dtype, float32 math
// inside. Under autocast, a 16-bit and a float32 operand give float32, as torch promotes: the
// residual stream stays float32, so a block's 16-bit output is added to a float32 sum and
// rounding does not pile up over the layers (llm.c rounds each residual sum to bf16;
// Megatron keeps an fp32 residual for this reason). Same shapes run the 16-bit kernel
// (ops/binary16.h, no conversion); a broadcast widens its 16-bit operands first (counted
// conversions). Anything else: nullopt (the ordinary checks name the mismatch).
template <class F>
std::optional<Tensor> sixteen_bit_binary(BinaryOp op, F&& f, const Tensor& a, const Tensor& b) {
  const std::optional<DType> a16 = detail::sixteen_bit(a), b16 = detail::sixteen_bit(b);
  if (!a16 && !b16) return std::nullopt;
  const bool same = a16 && b16 && *a16 == *b16;
  const bool mixed = (a16 ? b : a).dtype() == DType::Float32 && autocast::active();
  if (!same && !mixed) return std::nullopt;
  const DType out_dtype = same ? *a16 : DType::Float32;
  if (a.shape() == b.shape() && a.device() == b.device()) return detail::sixteen_bit_binary_kernel(op, a, b, out_dtype);
  const Tensor out = f(detail::autocast_convert(a, DType::Float32), detail::autocast_convert(b, DType::Float32));
  return same ? detail::autocast_convert(out, *a16) : out;
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  if (detail::sixteen_bit(a) || detail::sixteen_bit(b)) [[unlikely]] {
    if (auto r = sixteen_bit_binary(
            BinaryOp::Add, [](const Tensor& x, const Tensor& y) { return add(x, y); }, a, b))
      return *r;
  }
  Tensor out = detail::binary_op(BinaryOp::Add, a, b, "add");
  if (autograd::needs_grad({a, b})) {
    autograd::record("AddBackward", {a, b}, {out}, {}, [sa = a.shape(), sb = b.shape()](BackwardContext& ctx) {
      const Tensor& g = ctx.grad();
      return std::vector<Tensor>{ctx.needs(0) ? sum_to(g, sa) : Tensor(), ctx.needs(1) ? sum_to(g, sb) : Tensor()};
    });
  }
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = detail::binary_op(BinaryOp::Sub, a, b, "sub");
  if (autograd::needs_grad({a, b})) {
    autograd::record("SubBackward", {a, b}, {out}, {}, [sa = a.shape(), sb = b.shape()](BackwardContext& ctx) {
      const Tensor& g = ctx.grad();
      return std::vector<Tensor>{ctx.needs(0) ? sum_to(g, sa) : Tensor(), ctx.needs(1) ? sum_to(neg(g), sb) : Tensor()};
    });
  }
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  if (detail::sixteen_bit(a) || detail::sixteen_bit(b)) [[unlikely]] {
    if (auto r = sixteen_bit_binary(
            BinaryOp::Mul, [](const Tensor& x, const Tensor& y) { return mul(x, y); }, a, b))
      return *r;
  }
  Tensor out = detail::binary_op(BinaryOp::Mul, a, b, "mul");
  if (autograd::needs_grad({a, b})) {
    Tensor sa = a.detach(), sb = b.detach();
    autograd::record("MulBackward", {a, b}, {out}, {sa, sb}, [a = sa, b = sb](BackwardContext& ctx) {
      const Tensor& g = ctx.grad();
      return std::vector<Tensor>{ctx.needs(0) ? sum_to(mul(g, b), a.shape()) : Tensor(),
                                 ctx.needs(1) ? sum_to(mul(g, a), b.shape()) : Tensor()};
    });
  }
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = detail::binary_op(BinaryOp::Div, a, b, "div");
  if (autograd::needs_grad({a, b})) {
    Tensor sa = a.detach(), sb = b.detach();
    autograd::record("DivBackward", {a, b}, {out}, {sa, sb}, [a = sa, b = sb](BackwardContext& ctx) {
      const Tensor& g = ctx.grad();
      Tensor ga, gb;
      if (ctx.needs(0)) ga = sum_to(div(g, b), a.shape());
      if (ctx.needs(1)) gb = sum_to(neg(div(mul(g, a), mul(b, b))), b.shape());
      return std::vector<Tensor>{ga, gb};
    });
  }
  return out;
}

Tensor minimum(const Tensor& a, const Tensor& b) {
  return binary_with_grads(BinaryOp::Minimum, BinaryGradOp::MinimumA, BinaryGradOp::MinimumB, a, b, "minimum",
                           "MinimumBackward");
}

Tensor maximum(const Tensor& a, const Tensor& b) {
  return binary_with_grads(BinaryOp::Maximum, BinaryGradOp::MaximumA, BinaryGradOp::MaximumB, a, b, "maximum",
                           "MaximumBackward");
}

Tensor pow(const Tensor& a, const Tensor& exponent) {
  return binary_with_grads(BinaryOp::Pow, BinaryGradOp::PowBase, BinaryGradOp::PowExponent, a, exponent, "pow",
                           "PowBackward");
}

Tensor pow(double base, const Tensor& exponent) {
  STRATA_CHECK(exponent.defined(), "pow: exponent is undefined");
  return pow(scalar_tensor(base, {.dtype = exponent.dtype(), .device = exponent.device()}), exponent);
}

Tensor add(const Tensor& a, double b) {
  Tensor out = detail::unary_op(UnaryOp::AddScalar, a, "add", b);
  if (autograd::needs_grad({a})) {
    autograd::record("AddScalarBackward", {a}, {out}, {},
                     [](BackwardContext& ctx) { return std::vector<Tensor>{ctx.grad()}; });
  }
  return out;
}

Tensor mul(const Tensor& a, double b) {
  Tensor out = detail::unary_op(UnaryOp::MulScalar, a, "mul", b);
  if (autograd::needs_grad({a})) {
    autograd::record("MulScalarBackward", {a}, {out}, {},
                     [b](BackwardContext& ctx) { return std::vector<Tensor>{mul(ctx.grad(), b)}; });
  }
  return out;
}

Tensor& add_(Tensor& self, const Tensor& other, double alpha) {
  STRATA_CHECK(!(grad_enabled() && self.requires_grad()),
               "add_: in-place write to a tensor that requires grad; wrap it in NoGradGuard");
  const Device device = detail::common_device("add_", {{"self", self}, {"other", other}});
  detail::on_device(
      "add_", device, [&] { cpu::add_inplace(self, other, alpha); },
      [&] { cuda_ops::add_inplace(self, other, alpha); });
  self.bump_version();
  return self;
}

Tensor& mul_(Tensor& self, double value) {
  STRATA_CHECK(!(grad_enabled() && self.requires_grad()),
               "mul_: in-place write to a tensor that requires grad; wrap it in NoGradGuard");
  detail::on_device(
      "mul_", self.device(), [&] { cpu::mul_inplace(self, value); }, [&] { cuda_ops::mul_inplace(self, value); });
  self.bump_version();
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
