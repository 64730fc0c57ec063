// Unary elementwise ops (elementwise.h) and their gradients.
#include <limits>

#include "ops/autocast_cast.h"
#include "ops/elementwise_common.h"
#include "ops/unary16.h"
#include "strata/autograd/function.h"
#include "strata/ops/elementwise.h"

namespace strata {

using autograd::BackwardContext;
using backend::UnaryGradOp;
using backend::UnaryOp;

namespace {

// A unary op whose gradient is grad * f'(x), computed by `grad_op` from the input x (or, for
// ops whose derivative is cheaper from the output, from the output: saved_is_output).
Tensor unary_with_grad(UnaryOp op, UnaryGradOp grad_op, const Tensor& a, const char* name, const char* node,
                       bool saved_is_output, double p = 0, double q = 0) {
  Tensor out = detail::unary_op(op, a, name, p, q);
  if (autograd::needs_grad({a})) {
    Tensor saved = saved_is_output ? out.detach() : a.detach();
    autograd::record(node, {a}, {out}, {saved}, [saved, grad_op, node, p, q](BackwardContext& ctx) {
      return std::vector<Tensor>{detail::unary_grad_op(grad_op, ctx.grad(), saved, node, p, q)};
    });
  }
  return out;
}

}  // namespace

Tensor neg(const Tensor& a) {
  Tensor out = detail::unary_op(UnaryOp::Neg, a, "neg");
  if (autograd::needs_grad({a})) {
    autograd::record("NegBackward", {a}, {out}, {},
                     [](BackwardContext& ctx) { return std::vector<Tensor>{neg(ctx.grad())}; });
  }
  return out;
}

Tensor abs(const Tensor& a) { return unary_with_grad(UnaryOp::Abs, UnaryGradOp::Abs, a, "abs", "AbsBackward", false); }

Tensor sigmoid(const Tensor& a) {
  return unary_with_grad(UnaryOp::Sigmoid, UnaryGradOp::Sigmoid, a, "sigmoid", "SigmoidBackward", true);
}

// A 16-bit a: the 16-bit kernel (float32 math, the output rounded once to a's dtype).
Tensor silu(const Tensor& a) {
  if (detail::sixteen_bit(a))
    return detail::sixteen_bit_activation(UnaryOp::Silu, UnaryGradOp::Silu, a, "silu", "SiluBackward");
  return unary_with_grad(UnaryOp::Silu, UnaryGradOp::Silu, a, "silu", "SiluBackward", false);
}

Tensor rsqrt(const Tensor& a) {
  return unary_with_grad(UnaryOp::Rsqrt, UnaryGradOp::Rsqrt, a, "rsqrt", "RsqrtBackward", true);
}

Tensor pow(const Tensor& a, double exponent) {
  return unary_with_grad(UnaryOp::Pow, UnaryGradOp::Pow, a, "pow", "PowBackward", false, exponent);
}

Tensor clamp(const Tensor& a, std::optional<double> min, std::optional<double> max) {
  STRATA_CHECK(min.has_value() || max.has_value(), "clamp: at least one of min and max must be given");
  const double inf = std::numeric_limits<double>::infinity();
  return unary_with_grad(UnaryOp::Clamp, UnaryGradOp::Clamp, a, "clamp", "ClampBackward", false, min.value_or(-inf),
                         max.value_or(inf));
}

Tensor exp(const Tensor& a) { return unary_with_grad(UnaryOp::Exp, UnaryGradOp::Exp, a, "exp", "ExpBackward", true); }
Tensor log(const Tensor& a) { return unary_with_grad(UnaryOp::Log, UnaryGradOp::Log, a, "log", "LogBackward", false); }
Tensor tanh(const Tensor& a) {
  return unary_with_grad(UnaryOp::Tanh, UnaryGradOp::Tanh, a, "tanh", "TanhBackward", true);
}

Tensor sqrt(const Tensor& a) {
  return unary_with_grad(UnaryOp::Sqrt, UnaryGradOp::Sqrt, a, "sqrt", "SqrtBackward", true);
}

}  // namespace strata
