#include "strata/ops/compare.h"

#include <algorithm>

#include "backend/cuda/cuda_ops.h"
#include "backend/dispatch/device_dispatch.h"
#include "ops/elementwise_common.h"
#include "strata/autograd/function.h"
#include "strata/ops/reduce.h"
#include "strata/tensor/factory.h"

namespace strata {

using autograd::BackwardContext;
using backend::CompareOp;

namespace {

Tensor compare_op(CompareOp op, const Tensor& a, const Tensor& b, const char* name) {
  const Device device = detail::check_binary(name, a, b);
  return detail::on_device(
      name, device, [&] { return cpu::compare(op, a, b, name); }, [&] { return cuda_ops::compare(op, a, b, name); });
}

// b as a tensor of shape [] like a, for the scalar comparisons.
Tensor scalar_like(const Tensor& a, double b, const char* name) {
  STRATA_CHECK(a.defined(), name, ": a is undefined");
  return scalar_tensor(b, {.dtype = a.dtype(), .device = a.device()});
}

void check_mask(const char* name, const char* what, const Tensor& t) {
  STRATA_CHECK(t.defined(), name, ": ", what, " is undefined");
  STRATA_CHECK(t.dtype() == DType::Bool, name, ": ", what, " must be a bool tensor, got ", t.dtype(), " of shape ",
               t.shape(), " (make one with a comparison such as gt(x, 0.0))");
}

// The broadcast shape of where's three inputs; the error names all three shapes.
Shape where_shape(const Tensor& cond, const Tensor& a, const Tensor& b) {
  const size_t n = std::max({cond.dim(), a.dim(), b.dim()});
  std::vector<int64_t> out(n, 1);
  for (const Tensor* t : {&cond, &a, &b}) {
    const size_t lead = n - static_cast<size_t>(t->dim());
    for (size_t i = lead; i < n; ++i) {
      const int64_t d = t->shape()[i - lead];
      STRATA_CHECK(d == out[i] || d == 1 || out[i] == 1, "where: shapes ", cond.shape(), " (condition), ", a.shape(),
                   " (a) and ", b.shape(), " (b) cannot be broadcast together (dimension ", i, ")");
      if (d != 1) out[i] = d;
    }
  }
  return Shape(std::move(out));
}

}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) { return compare_op(CompareOp::Eq, a, b, "eq"); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare_op(CompareOp::Ne, a, b, "ne"); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare_op(CompareOp::Lt, a, b, "lt"); }
Tensor le(const Tensor& a, const Tensor& b) { return compare_op(CompareOp::Le, a, b, "le"); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare_op(CompareOp::Gt, a, b, "gt"); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare_op(CompareOp::Ge, a, b, "ge"); }
Tensor eq(const Tensor& a, double b) { return eq(a, scalar_like(a, b, "eq")); }
Tensor ne(const Tensor& a, double b) { return ne(a, scalar_like(a, b, "ne")); }
Tensor lt(const Tensor& a, double b) { return lt(a, scalar_like(a, b, "lt")); }
Tensor le(const Tensor& a, double b) { return le(a, scalar_like(a, b, "le")); }
Tensor gt(const Tensor& a, double b) { return gt(a, scalar_like(a, b, "gt")); }
Tensor ge(const Tensor& a, double b) { return ge(a, scalar_like(a, b, "ge")); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_mask("where", "condition", cond);
  STRATA_CHECK(a.defined() && b.defined(), "where: ", a.defined() ? "b" : "a", " is undefined");
  const Shape shape = where_shape(cond, a, b);
  const Device device = detail::check_binary("where", a, b);
  detail::common_device("where", {{"condition", cond}, {"a", a}});
  Tensor out = detail::on_device(
      "where", device, [&] { return cpu::where(cond, a, b, shape, "where"); },
      [&] { return cuda_ops::where(cond, a, b, shape, "where"); });
  if (autograd::needs_grad({a, b})) {
    autograd::record("WhereBackward", {a, b}, {out}, {cond},
                     [cond, sa = a.shape(), sb = b.shape()](BackwardContext& ctx) {
                       const Tensor& g = ctx.grad();
                       const Tensor zero = scalar_tensor(0.0, {.dtype = g.dtype(), .device = g.device()});
                       Tensor ga, gb;
                       if (ctx.needs(0)) ga = sum_to(where(cond, g, zero), sa);
                       if (ctx.needs(1)) gb = sum_to(where(cond, zero, g), sb);
                       return std::vector<Tensor>{ga, gb};
                     });
  }
  return out;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  STRATA_CHECK(x.defined(), "masked_fill: x is undefined");
  check_mask("masked_fill", "mask", mask);
  const Device device = detail::common_device("masked_fill", {{"x", x}, {"mask", mask}});
  const Shape shape = broadcast_shapes(x.shape(), mask.shape(), "masked_fill");
  Tensor out = detail::on_device(
      "masked_fill", device, [&] { return cpu::masked_fill(x, mask, value, shape, "masked_fill"); },
      [&] { return cuda_ops::masked_fill(x, mask, value, shape, "masked_fill"); });
  if (autograd::needs_grad({x})) {
    autograd::record("MaskedFillBackward", {x}, {out}, {mask}, [mask, sx = x.shape()](BackwardContext& ctx) {
      const Tensor& g = ctx.grad();
      return std::vector<Tensor>{
          sum_to(where(mask, scalar_tensor(0.0, {.dtype = g.dtype(), .device = g.device()}), g), sx)};
    });
  }
  return out;
}

}  // namespace strata
