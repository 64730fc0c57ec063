// matmul and linear: argument checks, the device switch, autograd. Both kernels, the CPU's
// (cpu/matmul) and CUDA's (cuda/matmul, cuBLASLt), read strided operands in place as the
// shared GEMM plan (gemm_plan.h) describes: transposes go to the GEMM as flags, only layouts
// no GEMM can address are copied. On CUDA the operands may also be bfloat16/float16 (float32
// accumulation, output in the input dtype).
#include "strata/ops/linalg.h"

#include <algorithm>

#include "backend/cpu/gemm_backend.h"
#include "backend/cpu/matmul.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/dispatch/device_dispatch.h"
#include "ops/autocast_cast.h"
#include "ops/nn_common.h"
#include "ops/products.h"
#include "strata/autograd/function.h"
#include "strata/ops/autocast.h"
#include "strata/ops/reduce.h"
#include "strata/tensor/factory.h"

namespace strata {
namespace {

using namespace products;  // NOLINT(google-build-using-namespace): the shared product helpers

// The bias gradient: g's column sums. float32/float64 through sum, which runs one fixed
// order on both devices (the CPU and GPU agree bit for bit). 16-bit gradients (CUDA only;
// sum takes neither dtype) as a GEMM, g^T @ ones: one deterministic call (the batch folds
// into the contraction), float32 accumulation, one rounding to g's dtype. g is [batch.., M, out].
Tensor bias_grad(const Tensor& g) {
  if (!detail::is_16bit(g.dtype())) return sum(g, dim_range(0, g.dim() - 1));
  Shape ones_shape = leading(g.shape(), 1);
  ones_shape.push_back(1);
  const Tensor ones = full(ones_shape, 1.0, {.dtype = g.dtype(), .device = g.device()});
  return bmm_sum("linear", g.transpose(-1, -2), ones).view({g.size(-1)});
}

// torch.matmul's broadcasting of unequal batch dimensions ([2, 1, 3, 4] @ [5, 4, 6] ->
// [2, 5, 3, 6]), composed of views so the GEMM still reads the operands in place and the
// gradients reduce to each operand's shape through the views' own backward. An operand
// whose batch holds one matrix becomes that matrix (the shared-operand path: its gradient is
// one summed GEMM); the other is expanded (stride 0) to the common batch.
Tensor broadcast_matmul(const Tensor& a, const Tensor& b, const Shape& batch_a, const Shape& batch_b) {
  const size_t n = std::max(batch_a.size(), batch_b.size());
  for (size_t i = 1; i <= n; ++i) {  // aligned from the right, as broadcasting aligns them
    const int64_t da = i <= batch_a.size() ? batch_a[batch_a.size() - i] : 1;
    const int64_t db = i <= batch_b.size() ? batch_b[batch_b.size() - i] : 1;
    STRATA_CHECK(da == db || da == 1 || db == 1, "matmul: batch dimensions do not broadcast: a ", a.shape(),
                 " has batch ", batch_a, ", b ", b.shape(), " has batch ", batch_b, " (", da, " vs ", db,
                 "; each pair must be equal or one of them 1)");
  }
  const Shape batch = broadcast_shapes(batch_a, batch_b, "matmul");
  auto as_operand = [&batch](const Tensor& t, const Shape& own) {
    if (own.numel() == 1) {
      Tensor m = t;
      while (m.dim() > 2) m = m.squeeze(0);  // views: a transposed matrix stays in place
      return m;
    }
    Shape full = batch;
    full.push_back(t.size(-2));
    full.push_back(t.size(-1));
    return own == batch ? t : t.expand(full);
  };
  Shape out_shape = batch;
  out_shape.push_back(a.size(-2));
  out_shape.push_back(b.size(-1));
  return matmul(as_operand(a, batch_a), as_operand(b, batch_b)).reshape(out_shape);
}

// matmul under autocast: 16-bit operands, saved for backward (no second cast there); each
// gradient in its operand's dtype.
Tensor autocast_matmul(const Tensor& a, const Tensor& b, const Shape& batch, const Cast& cast) {
  const Tensor a16 = detail::autocast_operand(a, cast.dtype), b16 = detail::autocast_operand(b, cast.dtype);
  Tensor out = bmm16("matmul", a16, b16, batch, {}, cast);
  if (!autograd::needs_grad({a, b})) return out;
  autograd::record("MatmulBackward", {a, b}, {out}, {a16, b16},
                   [a16, b16, batch, cast, adt = a.dtype(), bdt = b.dtype()](autograd::BackwardContext& ctx) {
                     const Tensor g16 = detail::autocast_operand(ctx.grad(), cast.dtype);
                     Tensor ga, gb;
                     if (ctx.needs(0)) {
                       Tensor bt = b16.transpose(-1, -2);
                       ga = (a16.dim() == 2 && b16.dim() > 2) ? bmm_sum16("matmul", g16, bt, cast)
                                                              : bmm16("matmul", g16, bt, batch, {}, cast);
                     }
                     if (ctx.needs(1)) {
                       Tensor at = a16.transpose(-1, -2);
                       gb = (b16.dim() == 2 && a16.dim() > 2) ? bmm_sum16("matmul", at, g16, cast)
                                                              : bmm16("matmul", at, g16, batch, {}, cast);
                     }
                     return std::vector<Tensor>{in_dtype(ga, adt), in_dtype(gb, bdt)};
                   });
  return out;
}

// linear under autocast: the weight and bias come from the scope's weight cache. The bias
// gradient is summed in float32 from the widened output gradient (no 16-bit rounding of
// a sum over every row).
Tensor autocast_linear(const Tensor& x, const Tensor& x2, const Tensor& weight, const Tensor& bias, const Shape& batch,
                       const Cast& cast) {
  const Tensor x16 = detail::autocast_operand(x2, cast.dtype), w16 = detail::autocast_operand(weight, cast.dtype);
  Tensor out = bmm16("linear", x16, w16.transpose(0, 1), batch, detail::autocast_operand(bias, cast.dtype), cast);
  if (x.dim() == 1) out = out.view({weight.size(0)});
  if (!autograd::needs_grad({x, weight, bias})) return out;
  const DType bdt = bias.defined() ? bias.dtype() : DType::Float32;
  autograd::record("LinearBackward", {x, weight, bias}, {out}, {x16, w16},
                   [x16, w16, batch, cast, bdt, xdt = x.dtype(), wdt = weight.dtype(),
                    x_shape = x.shape()](autograd::BackwardContext& ctx) {
                     Tensor g = ctx.grad();
                     if (g.dim() == 1) g = g.unsqueeze(0);
                     const Tensor g16 = detail::autocast_operand(g, cast.dtype);
                     Tensor gx, gw, gb;
                     if (ctx.needs(0)) gx = in_dtype(bmm16("linear", g16, w16, batch, {}, cast), xdt).view(x_shape);
                     if (ctx.needs(1)) gw = in_dtype(bmm_sum16("linear", g16.transpose(-1, -2), x16, cast), wdt);
                     if (ctx.needs(2))
                       gb = in_dtype(sum(detail::autocast_convert(g, DType::Float32), dim_range(0, g.dim() - 1)), bdt);
                     return std::vector<Tensor>{gx, gw, gb};
                   });
  return out;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  const CastOpt cast = autocast_for({a, b});
  check_operand(a, "matmul", "a", cast);
  check_operand(b, "matmul", "b", cast);
  detail::common_device("matmul", {{"a", a}, {"b", b}});
  STRATA_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: operands must have at least one dimension, got a ", a.shape(),
               " and b ", b.shape());
  STRATA_CHECK(a.dtype() == b.dtype() || cast, "matmul: dtypes differ: a ", a.shape(), " is ", a.dtype(), ", b ",
               b.shape(), " is ", b.dtype());
  // Vectors, as in torch: [k] is a row on the left and a column on the right, dropped after.
  if (a.dim() == 1 && b.dim() == 1) return matmul(a.unsqueeze(0), b.unsqueeze(1)).reshape({});
  if (a.dim() == 1) return matmul(a.unsqueeze(0), b).squeeze(-2);
  if (b.dim() == 1) return matmul(a, b.unsqueeze(1)).squeeze(-1);

  STRATA_CHECK(a.size(-1) == b.size(-2), "matmul: inner dimensions differ: a ", a.shape(), " has ", a.size(-1),
               " columns but b ", b.shape(), " has ", b.size(-2), " rows");
  const Shape batch_a = leading(a.shape(), 2), batch_b = leading(b.shape(), 2);
  if (!batch_a.empty() && !batch_b.empty() && batch_a != batch_b) return broadcast_matmul(a, b, batch_a, batch_b);
  const Shape batch = batch_a.empty() ? batch_b : batch_a;
  if (cast) return autocast_matmul(a, b, batch, *cast);

  Tensor out = bmm("matmul", a, b, batch);
  if (autograd::needs_grad({a, b})) {
    Tensor sa = a.detach(), sb = b.detach();
    autograd::record("MatmulBackward", {a, b}, {out}, {sa, sb},
                     [a = sa, b = sb, batch](autograd::BackwardContext& ctx) {
                       const Tensor& g = ctx.grad();
                       Tensor ga, gb;
                       // dA = dC B^T, dB = A^T dC; the transposes are views BLAS reads with a flag. An operand
                       // shared across the batch gets the sum over the batch.
                       if (ctx.needs(0)) {
                         Tensor bt = b.transpose(-1, -2);
                         ga = (a.dim() == 2 && b.dim() > 2) ? bmm_sum("matmul", g, bt) : bmm("matmul", g, bt, batch);
                       }
                       if (ctx.needs(1)) {
                         Tensor at = a.transpose(-1, -2);
                         gb = (b.dim() == 2 && a.dim() > 2) ? bmm_sum("matmul", at, g) : bmm("matmul", at, g, batch);
                       }
                       return std::vector<Tensor>{ga, gb};
                     });
  }
  return out;
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const CastOpt cast = autocast_for({x, weight, bias});
  check_operand(x, "linear", "input", cast);
  if (!cast) detail::check_param(weight, x.dtype(), "linear", "weight");
  detail::common_device("linear", {{"input", x}, {"weight", weight}, {"bias", bias}});
  STRATA_CHECK(weight.defined(), "linear: weight is undefined");
  STRATA_CHECK(x.dim() >= 1, "linear: input must have at least one dimension, got ", x.shape());
  STRATA_CHECK(weight.dim() == 2, "linear: weight must be [out, in], got ", weight.shape());
  STRATA_CHECK(x.size(-1) == weight.size(1), "linear: input ", x.shape(), " has ", x.size(-1), " features but weight ",
               weight.shape(), " expects ", weight.size(1));
  if (bias.defined()) {
    if (!cast) detail::check_param(bias, x.dtype(), "linear", "bias");
    STRATA_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), "linear: bias ", bias.shape(),
                 " does not match weight ", weight.shape(), " (expected [", weight.size(0), "])");
  }
  const bool vector_in = x.dim() == 1;
  Tensor x2 = vector_in ? x.detach().unsqueeze(0) : x.detach();
  const Shape batch = leading(x2.shape(), 2);
  if (cast) return autocast_linear(x, x2, weight, bias, batch, *cast);
  // A 16-bit weight or bias is used through a float32 copy that dies with this forward.
  Tensor out =
      bmm("linear", x2, compute_values(weight, x.dtype()).transpose(0, 1), batch, compute_values(bias, x.dtype()));
  if (vector_in) out = out.view({weight.size(0)});

  if (autograd::needs_grad({x, weight, bias})) {
    const DType bdt = bias.defined() ? bias.dtype() : x.dtype();
    const Tensor w_saved = weight.detach();
    autograd::record(
        "LinearBackward", {x, weight, bias}, {out}, {x2, w_saved},
        [x2, w = w_saved, bdt, batch, x_shape = x.shape(), cdt = x.dtype()](autograd::BackwardContext& ctx) {
          Tensor g = ctx.grad();
          if (g.dim() == 1) g = g.unsqueeze(0);
          Tensor gx, gw, gb;
          // dx = dy W (one GEMM over all rows), dW = dy^T x (the rows are the
          // contraction, so one GEMM too), db = column sums of dy. A 16-bit W of a
          // float32 input is converted again here; its gradients are rounded to its
          // dtype.
          if (ctx.needs(0)) gx = bmm("linear", g, compute_values(w, cdt), batch).view(x_shape);
          if (ctx.needs(1)) gw = detail::param_grad(bmm_sum("linear", g.transpose(-1, -2), x2), w.dtype());
          if (ctx.needs(2)) gb = detail::param_grad(bias_grad(g), bdt);
          return std::vector<Tensor>{gx, gw, gb};
        });
  }
  return out;
}

const char* gemm_backend() { return cpu::gemm_backend_name(); }

}  // namespace strata
