// matmul and linear: argument checks, the device switch, autograd. The CPU kernel
// (cpu/matmul) reads strided operands in place as the shared GEMM plan (gemm_plan.h)
// describes: transposes go to BLAS as flags, only layouts no GEMM can address are copied.
#include "strata/tensor/ops/linalg.h"

#include "../cpu/matmul.h"
#include "../device_dispatch.h"
#include "nn_common.h"
#include "strata/autograd/function.h"
#include "strata/tensor/ops/reduce.h"

namespace strata {
namespace {

// out[batch.., M, N] = a[i] @ b[i] (+ bias on every row). a is [batch.., M, K] or [M, K],
// b is [batch.., K, N] or [K, N]; a 2-D operand is shared by every batch entry. `op` names
// the public op in errors.
Tensor bmm(const char* op, const Tensor& a, const Tensor& b, const Shape& batch, const Tensor& bias = {}) {
  return detail::on_device(op, a.device(), [&] { return cpu::matmul(a.detach(), b.detach(), batch, bias); });
}

// out[M, N] = sum over the batch of a[i] @ b[i]; a [batch.., M, K], b [batch.., K, N] (the
// gradient of an operand that was shared across a batch).
Tensor bmm_sum(const char* op, const Tensor& a, const Tensor& b) {
  return detail::on_device(op, a.device(), [&] { return cpu::matmul_sum(a.detach(), b.detach()); });
}

std::vector<int64_t> dim_range(int64_t begin, int64_t end) {
  std::vector<int64_t> dims;
  for (int64_t d = begin; d < end; ++d) dims.push_back(d);
  return dims;
}

Shape leading(const Shape& s, size_t drop) { return Shape(s.begin(), s.end() - static_cast<std::ptrdiff_t>(drop)); }

void check_operand(const Tensor& t, const char* op, const char* name) {
  STRATA_CHECK(t.defined(), op, ": ", name, " is undefined");
  STRATA_CHECK(t.dtype() == DType::Float32 || t.dtype() == DType::Float64, op, ": ", name, " has dtype ", t.dtype(),
               " (shape ", t.shape(), "); float32 or float64 is supported");
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_operand(a, "matmul", "a");
  check_operand(b, "matmul", "b");
  detail::common_device("matmul", {{"a", a}, {"b", b}});
  STRATA_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: operands must have at least one dimension, got a ", a.shape(),
               " and b ", b.shape());
  STRATA_CHECK(a.dtype() == b.dtype(), "matmul: dtypes differ: a ", a.shape(), " is ", a.dtype(), ", b ", b.shape(),
               " is ", b.dtype());
  // Vectors, as in torch: [k] is a row on the left and a column on the right, dropped after.
  if (a.dim() == 1 && b.dim() == 1) return matmul(a.unsqueeze(0), b.unsqueeze(1)).reshape({});
  if (a.dim() == 1) return matmul(a.unsqueeze(0), b).squeeze(-2);
  if (b.dim() == 1) return matmul(a, b.unsqueeze(1)).squeeze(-1);

  STRATA_CHECK(a.size(-1) == b.size(-2), "matmul: inner dimensions differ: a ", a.shape(), " has ", a.size(-1),
               " columns but b ", b.shape(), " has ", b.size(-2), " rows");
  const Shape batch_a = leading(a.shape(), 2), batch_b = leading(b.shape(), 2);
  STRATA_CHECK(batch_a.empty() || batch_b.empty() || batch_a == batch_b, "matmul: batch dimensions differ: a ",
               a.shape(), " has batch ", batch_a, ", b ", b.shape(), " has batch ", batch_b,
               " (they must be equal, or one operand must be a matrix)");
  const Shape batch = batch_a.empty() ? batch_b : batch_a;

  Tensor out = bmm("matmul", a, b, batch);
  if (autograd::needs_grad({a, b})) {
    autograd::record("MatmulBackward", {a, b}, {out}, [a = a.detach(), b = b.detach(), batch](autograd::BackwardContext& ctx) {
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
  check_operand(x, "linear", "input");
  detail::check_param(weight, x.dtype(), "linear", "weight");
  detail::common_device("linear", {{"input", x}, {"weight", weight}, {"bias", bias}});
  STRATA_CHECK(x.dim() >= 1, "linear: input must have at least one dimension, got ", x.shape());
  STRATA_CHECK(weight.dim() == 2, "linear: weight must be [out, in], got ", weight.shape());
  STRATA_CHECK(x.size(-1) == weight.size(1), "linear: input ", x.shape(), " has ", x.size(-1),
               " features but weight ", weight.shape(), " expects ", weight.size(1));
  if (bias.defined()) {
    detail::check_param(bias, x.dtype(), "linear", "bias");
    STRATA_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), "linear: bias ", bias.shape(),
                 " does not match weight ", weight.shape(), " (expected [", weight.size(0), "])");
  }
  const bool vector_in = x.dim() == 1;
  Tensor x2 = vector_in ? x.detach().unsqueeze(0) : x.detach();
  const Shape batch = leading(x2.shape(), 2);
  // A 16-bit weight or bias is used through a float32 copy that dies with this forward.
  Tensor out = bmm("linear", x2, detail::param_values(weight).transpose(0, 1), batch, detail::param_values(bias));
  if (vector_in) out = out.view({weight.size(0)});

  if (autograd::needs_grad({x, weight, bias})) {
    const DType bdt = bias.defined() ? bias.dtype() : x.dtype();
    autograd::record("LinearBackward", {x, weight, bias}, {out},
                     [x2, w = weight.detach(), bdt, batch, x_shape = x.shape()](autograd::BackwardContext& ctx) {
                       Tensor g = ctx.grad();
                       if (g.dim() == 1) g = g.unsqueeze(0);
                       Tensor gx, gw, gb;
                       // dx = dy W (one GEMM over all rows), dW = dy^T x (the rows are the
                       // contraction, so one GEMM too), db = column sums of dy. A 16-bit W is
                       // converted again here; its gradients are rounded to its dtype.
                       if (ctx.needs(0)) gx = bmm("linear", g, detail::param_values(w), batch).view(x_shape);
                       if (ctx.needs(1)) gw = detail::param_grad(bmm_sum("linear", g.transpose(-1, -2), x2), w.dtype());
                       if (ctx.needs(2)) gb = detail::param_grad(sum(g, dim_range(0, g.dim() - 1)), bdt);
                       return std::vector<Tensor>{gx, gw, gb};
                     });
  }
  return out;
}

}  // namespace strata
