// matmul and linear on BLAS. Operands are read in place whenever their last two dimensions
// have strides (ld, 1) or (1, ld) (transposed views included): the transpose goes to BLAS as
// a flag. Only other layouts are copied with contiguous().
#include "strata/tensor/ops/linalg.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "../cpu/gemm.h"
#include "../dispatch.h"
#include "nn_common.h"
#include "strata/autograd/function.h"
#include "strata/tensor/factory.h"
#include "strata/tensor/ops/reduce.h"

namespace strata {
namespace {

// A tensor over t's storage and offset with other sizes and strides; no autograd.
Tensor strided_view(const Tensor& t, Shape shape, Strides strides) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.storage();
  impl->offset = t.offset();
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->dtype = t.dtype();
  return Tensor(std::move(impl));
}

// Whether the dimensions `dims` of t (outermost first) address their elements with a single
// stride, as one dimension of size *size and stride *stride would.
bool merge_dims(const Tensor& t, const std::vector<int64_t>& dims, int64_t* size, int64_t* stride) {
  int64_t n = 1, s = 1;
  bool have_inner = false;  // s is the stride of the innermost dimension of size > 1 so far
  for (auto it = dims.rbegin(); it != dims.rend(); ++it) {
    const int64_t len = t.shape()[static_cast<size_t>(*it)];
    const int64_t st = t.strides()[static_cast<size_t>(*it)];
    if (len == 0) {
      *size = 0;
      *stride = 1;
      return true;
    }
    if (len == 1) continue;
    if (!have_inner) {
      s = st;
      have_inner = true;
    } else if (st != s * n) {
      return false;
    }
    n *= len;
  }
  *size = n;
  *stride = s;
  return true;
}

std::vector<int64_t> dim_range(int64_t begin, int64_t end) {
  std::vector<int64_t> dims;
  for (int64_t d = begin; d < end; ++d) dims.push_back(d);
  return dims;
}

// How BLAS reads a rows x cols matrix with strides (rs, cs) in place: row-major with leading
// dimension ld (trans = false) or as the transpose of a row-major matrix (trans = true).
struct Layout {
  bool trans = false;
  int64_t ld = 1;
};

std::optional<Layout> blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if (rows == 0 || cols == 0) return Layout{false, std::max<int64_t>(1, cols)};  // nothing is read
  // A single row or column never steps by the other stride, so that stride is free.
  if ((cs == 1 || cols <= 1) && (rows <= 1 || rs >= std::max<int64_t>(1, cols)))
    return Layout{false, rows <= 1 ? std::max<int64_t>(1, cols) : rs};
  if ((rs == 1 || rows <= 1) && (cols <= 1 || cs >= std::max<int64_t>(1, rows)))
    return Layout{true, cols <= 1 ? std::max<int64_t>(1, rows) : cs};
  return std::nullopt;
}

// A matrix (stack) operand: its last two dimensions readable by BLAS, copied if need be.
struct Operand {
  Tensor t;
  Layout layout;
};

Operand as_operand(const Tensor& t) {
  const int64_t nd = t.dim();
  if (auto l = blas_layout(t.shape()[static_cast<size_t>(nd - 2)], t.shape()[static_cast<size_t>(nd - 1)],
                           t.strides()[static_cast<size_t>(nd - 2)], t.strides()[static_cast<size_t>(nd - 1)]))
    return {t, *l};
  Tensor c = t.contiguous();
  return {c, Layout{false, std::max<int64_t>(1, c.size(-1))}};
}

// Element offset of every matrix of a [batch.., r, c] stack; all zero for a 2-D operand.
std::vector<int64_t> batch_offsets(const Tensor& t, const Shape& batch) {
  const int64_t nb = batch.numel();
  std::vector<int64_t> offsets(static_cast<size_t>(nb), 0);
  if (t.dim() == 2) return offsets;
  for (int64_t i = 0; i < nb; ++i) {
    int64_t rem = i, off = 0;
    for (size_t d = batch.size(); d-- > 0;) {
      off += (rem % batch[d]) * t.strides()[d];
      rem /= batch[d];
    }
    offsets[static_cast<size_t>(i)] = off;
  }
  return offsets;
}

// out[batch.., M, N] = a[i] @ b[i] (+ bias on every row). a is [batch.., M, K] or [M, K],
// b is [batch.., K, N] or [K, N]; a 2-D operand is shared by every batch entry.
Tensor bmm(const Tensor& a_in, const Tensor& b_in, const Shape& batch, const Tensor& bias = {}) {
  Tensor a = a_in.detach(), b = b_in.detach();
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  Shape out_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  Tensor out = empty(out_shape, {.dtype = a.dtype()});
  if (out.numel() == 0) return out;
  detail::dispatch_floating(a.dtype(), "matmul", [&]<class T>() {
    T* c = out.data<T>();
    const int64_t rows_total = out.numel() / n;
    T beta = 0;
    if (bias.defined()) {  // bias rows then beta = 1: replaces the zeroing pass BLAS makes for beta = 0
      Tensor bc = bias.detach().contiguous();
      const T* bp = bc.data<T>();
#pragma omp parallel for if (rows_total * n > 65536) schedule(static)
      for (int64_t r = 0; r < rows_total; ++r) std::memcpy(c + r * n, bp, static_cast<size_t>(n) * sizeof(T));
      beta = 1;
    }
    if (b.dim() == 2) {
      // Every row of every matrix of a meets the same b: one GEMM over all rows when a's
      // rows share one stride (always after a copy, so copy only if a batched loop cannot
      // read a either).
      int64_t rows = 0, rs = 0;
      std::optional<Layout> la;
      if (merge_dims(a, dim_range(0, a.dim() - 1), &rows, &rs)) la = blas_layout(rows, k, rs, a.stride(-1));
      if (!la && !blas_layout(m, k, a.stride(-2), a.stride(-1))) {
        a = a.contiguous();
        rows = rows_total;
        la = Layout{false, std::max<int64_t>(1, k)};
      }
      if (la) {
        Operand ob = as_operand(b);
        cpu::gemm(la->trans, ob.layout.trans, rows, n, k, T(1), a.data<T>(), la->ld, ob.t.data<T>(), ob.layout.ld,
                  beta, c, n);
        return;
      }
    }
    Operand oa = as_operand(a), ob = as_operand(b);
    std::vector<int64_t> off_a = batch_offsets(oa.t, batch), off_b = batch_offsets(ob.t, batch);
    cpu::gemm_batched(oa.layout.trans, ob.layout.trans, m, n, k, T(1), oa.t.data<T>(), off_a.data(), oa.layout.ld,
                      ob.t.data<T>(), off_b.data(), ob.layout.ld, beta, c, m * n, n, batch.numel());
  });
  return out;
}

// out[M, N] = sum over the batch of a[i] @ b[i]; a [batch.., M, K], b [batch.., K, N] (the
// gradient of an operand that was shared across a batch).
Tensor bmm_sum(const Tensor& a_in, const Tensor& b_in) {
  Tensor a = a_in.detach(), b = b_in.detach();
  const int64_t nd = a.dim();
  const int64_t m = a.size(-2), n = b.size(-1);
  Tensor out = empty({m, n}, {.dtype = a.dtype()});
  if (out.numel() == 0) return out;
  detail::dispatch_floating(a.dtype(), "matmul", [&]<class T>() {
    T* c = out.data<T>();
    // The batch folds into the contraction when a's (batch.., K) and b's (batch.., K)
    // dimensions each merge: [M, batch*K] x [batch*K, N] in one GEMM.
    std::vector<int64_t> dims_a = dim_range(0, nd - 2), dims_b = dim_range(0, nd - 2);
    dims_a.push_back(nd - 1);
    dims_b.push_back(nd - 2);
    int64_t ka = 0, sa = 0, kb = 0, sb = 0;
    if (merge_dims(a, dims_a, &ka, &sa) && merge_dims(b, dims_b, &kb, &sb)) {
      Operand oa = as_operand(strided_view(a, {m, ka}, {a.stride(-2), sa}));
      Operand ob = as_operand(strided_view(b, {kb, n}, {sb, b.stride(-1)}));
      cpu::gemm(oa.layout.trans, ob.layout.trans, m, n, ka, T(1), oa.t.data<T>(), oa.layout.ld, ob.t.data<T>(),
                ob.layout.ld, T(0), c, n);
      return;
    }
    // Otherwise accumulate one batch entry after another (BLAS threads each product).
    Shape batch(a.shape().begin(), a.shape().end() - 2);
    Operand oa = as_operand(a), ob = as_operand(b);
    std::vector<int64_t> off_a = batch_offsets(oa.t, batch), off_b = batch_offsets(ob.t, batch);
    const int64_t k = a.size(-1);
    const T* pa = oa.t.data<T>();
    const T* pb = ob.t.data<T>();
    if (batch.numel() == 0) std::memset(c, 0, static_cast<size_t>(m * n) * sizeof(T));
    for (size_t i = 0; i < off_a.size(); ++i) {
      cpu::gemm(oa.layout.trans, ob.layout.trans, m, n, k, T(1), pa + off_a[i], oa.layout.ld, pb + off_b[i],
                ob.layout.ld, i == 0 ? T(0) : T(1), c, n);
    }
  });
  return out;
}

Shape leading(const Shape& s, size_t drop) { return Shape(s.begin(), s.end() - static_cast<std::ptrdiff_t>(drop)); }

void check_operand(const Tensor& t, const char* op, const char* name) {
  STRATA_CHECK(t.defined(), op, ": ", name, " is undefined");
  STRATA_CHECK(t.device().is_cpu(), op, ": ", name, " is on ", t.device(), "; only CPU tensors are supported here");
  STRATA_CHECK(t.dtype() == DType::Float32 || t.dtype() == DType::Float64, op, ": ", name, " has dtype ", t.dtype(),
               " (shape ", t.shape(), "); float32 or float64 is supported on CPU");
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_operand(a, "matmul", "a");
  check_operand(b, "matmul", "b");
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

  Tensor out = bmm(a, b, batch);
  if (autograd::needs_grad({a, b})) {
    autograd::record("MatmulBackward", {a, b}, {out}, [a = a.detach(), b = b.detach(), batch](autograd::BackwardContext& ctx) {
      const Tensor& g = ctx.grad();
      Tensor ga, gb;
      // dA = dC B^T, dB = A^T dC; the transposes are views BLAS reads with a flag. An operand
      // shared across the batch gets the sum over the batch.
      if (ctx.needs(0)) {
        Tensor bt = b.transpose(-1, -2);
        ga = (a.dim() == 2 && b.dim() > 2) ? bmm_sum(g, bt) : bmm(g, bt, batch);
      }
      if (ctx.needs(1)) {
        Tensor at = a.transpose(-1, -2);
        gb = (b.dim() == 2 && a.dim() > 2) ? bmm_sum(at, g) : bmm(at, g, batch);
      }
      return std::vector<Tensor>{ga, gb};
    });
  }
  return out;
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_operand(x, "linear", "input");
  detail::check_param(weight, x.dtype(), "linear", "weight");
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
  Tensor out = bmm(x2, detail::param_values(weight).transpose(0, 1), batch, detail::param_values(bias));
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
                       if (ctx.needs(0)) gx = bmm(g, detail::param_values(w), batch).view(x_shape);
                       if (ctx.needs(1)) gw = detail::param_grad(bmm_sum(g.transpose(-1, -2), x2), w.dtype());
                       if (ctx.needs(2)) gb = detail::param_grad(sum(g, dim_range(0, g.dim() - 1)), bdt);
                       return std::vector<Tensor>{gx, gw, gb};
                     });
  }
  return out;
}

}  // namespace strata
