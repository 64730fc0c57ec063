// round/floor/ceil/trunc/sign (elementwise.h) and isnan/isinf/isfinite (compare.h): one
// device switch each to the kernels of backend/cpu/rounding.h or cuda_ops.
#include "backend/cpu/rounding.h"

#include "backend/cuda/cuda_ops.h"
#include "backend/dispatch/device_dispatch.h"
#include "ops/elementwise_common.h"
#include "strata/autograd/function.h"
#include "strata/ops/compare.h"
#include "strata/ops/elementwise.h"
#include "strata/tensor/factory.h"

namespace strata {

using backend::ClassifyOp;
using backend::RoundingOp;

namespace {

// A piecewise-constant op: its node hands back zeros (as PyTorch, whose inputs then get a
// zero gradient rather than none).
Tensor rounding_op(RoundingOp op, const Tensor& a, const char* name, const char* node) {
  STRATA_CHECK(a.defined(), name, ": input is undefined");
  detail::check_not_bool(name, a);
  Tensor out = detail::on_device(
      name, a.device(), [&] { return cpu::rounding(op, a, name); }, [&] { return cuda_ops::rounding(op, a, name); });
  if (autograd::needs_grad({a})) {
    autograd::record(node, {a}, {out}, {},
                     [](autograd::BackwardContext& ctx) { return std::vector<Tensor>{zeros_like(ctx.grad())}; });
  }
  return out;
}

Tensor classify_op(ClassifyOp op, const Tensor& a, const char* name) {
  STRATA_CHECK(a.defined(), name, ": input is undefined");
  return detail::on_device(
      name, a.device(), [&] { return cpu::classify(op, a, name); }, [&] { return cuda_ops::classify(op, a, name); });
}

}  // namespace

Tensor round(const Tensor& a) { return rounding_op(RoundingOp::Round, a, "round", "RoundBackward"); }
Tensor floor(const Tensor& a) { return rounding_op(RoundingOp::Floor, a, "floor", "FloorBackward"); }
Tensor ceil(const Tensor& a) { return rounding_op(RoundingOp::Ceil, a, "ceil", "CeilBackward"); }
Tensor trunc(const Tensor& a) { return rounding_op(RoundingOp::Trunc, a, "trunc", "TruncBackward"); }
Tensor sign(const Tensor& a) { return rounding_op(RoundingOp::Sign, a, "sign", "SignBackward"); }

Tensor isnan(const Tensor& a) { return classify_op(ClassifyOp::IsNan, a, "isnan"); }
Tensor isinf(const Tensor& a) { return classify_op(ClassifyOp::IsInf, a, "isinf"); }
Tensor isfinite(const Tensor& a) { return classify_op(ClassifyOp::IsFinite, a, "isfinite"); }

}  // namespace strata
