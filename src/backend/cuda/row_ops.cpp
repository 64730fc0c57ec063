// CUDA glue of the row ops (softmax, log_softmax, cross_entropy, layer_norm, rms_norm):
// tensors to pointers, scratch from the caching allocator, one launch per step on the
// current stream (kernels/cuda/row_ops.cu runs common/row_*.h, as the CPU does).
#include <cstdint>
#include <cstring>
#include <limits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/float_element_type.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/common/column_sum.h"
#include "strata_kernels/elementwise.h"
#include "strata_kernels/row_ops.h"

namespace strata::cuda_ops {
namespace {

int32_t float_type(DType dtype, const char* op) { return cuda_detail::float_element_type(dtype, op); }

int32_t index_type(DType dtype) { return dtype == DType::Int32 ? STRATA_ELEMENT_I32 : STRATA_ELEMENT_I64; }

TensorOptions like(const Tensor& t, DType dtype) { return {.dtype = dtype, .device = t.device()}; }

// A row op's view of x: [rows, n] over the last dimension.
struct Rows {
  int64_t rows, n;
};
Rows rows_of(const Tensor& x) {
  const int64_t n = x.dim() == 0 ? 1 : x.size(-1);
  return {n == 0 ? 0 : x.numel() / n, n};
}

using Launch = cuda_detail::OpScope;

// softmax along the last dimension of contiguous x, forward or backward.
Tensor softmax_last(const Tensor& x, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  Launch l(x, op);
  Tensor y = empty_like(x);
  const Rows r = rows_of(x);
  if (r.rows == 0) return y;
  const int32_t type = float_type(x.dtype(), op);
  STRATA_LAUNCH(strata_softmax_rows(type, type, x.data_ptr(), y.data_ptr(), nullptr, r.rows, r.n, log, l.stream));
  return y;
}

Tensor softmax_backward_last(const Tensor& grad, const Tensor& y, bool log) {
  const char* op = log ? "log_softmax backward" : "softmax backward";
  Launch l(y, op);
  Tensor dx = empty_like(y);
  const Rows r = rows_of(y);
  if (r.rows == 0) return dx;
  const int32_t type = float_type(y.dtype(), op);
  STRATA_LAUNCH(strata_softmax_backward_rows(type, type, grad.data_ptr(), y.data_ptr(), dx.data_ptr(), r.rows, r.n, log,
                                             l.stream));
  return dx;
}

bool is_last(const Tensor& x, int64_t dim) { return dim == x.dim() - 1; }

// Another dimension moves last (a copy), and the result moves back.
Tensor moved_last(const Tensor& t, int64_t dim) { return t.transpose(dim, -1).contiguous(); }

}  // namespace

Tensor softmax_forward(const Tensor& x, int64_t dim, bool log) {
  if (is_last(x, dim)) return softmax_last(x, log);
  return moved_last(softmax_last(moved_last(x, dim), log), dim);
}

Tensor softmax_backward(const Tensor& grad, const Tensor& out, int64_t dim, bool log) {
  if (is_last(out, dim)) return softmax_backward_last(grad, out, log);
  return moved_last(softmax_backward_last(moved_last(grad, dim), moved_last(out, dim), log), dim);
}

backend::SoftmaxOutputs softmax_last16(const Tensor& x, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  Launch l(x, op);
  const DType compute = cuda_detail::compute_dtype_of(x.dtype());
  backend::SoftmaxOutputs p{empty(x.shape(), like(x, compute)), empty(x.shape(), like(x, x.dtype()))};
  const Rows r = rows_of(x);
  if (r.rows == 0) return p;
  STRATA_LAUNCH(strata_softmax_rows(float_type(compute, op), cuda_detail::storage_element_type(x.dtype(), op),
                                    x.data_ptr(), p.probs.data_ptr(), p.out.data_ptr(), r.rows, r.n, log, l.stream));
  return p;
}

Tensor softmax_backward_last16(const Tensor& grad, const Tensor& y, bool log) {
  const char* op = log ? "log_softmax backward" : "softmax backward";
  Launch l(y, op);
  Tensor dx = empty(grad.shape(), like(grad, grad.dtype()));
  const Rows r = rows_of(y);
  if (r.rows == 0) return dx;
  STRATA_LAUNCH(strata_softmax_backward_rows(float_type(y.dtype(), op),
                                             cuda_detail::storage_element_type(grad.dtype(), op), grad.data_ptr(),
                                             y.data_ptr(), dx.data_ptr(), r.rows, r.n, log, l.stream));
  return dx;
}

backend::SoftmaxOutputs attention_softmax_forward(const Tensor& scores, double scale, bool causal, DType out_dtype) {
  const char* op = "attention softmax";
  Launch l(scores, op);
  const DType compute = cuda_detail::compute_dtype_of(scores.dtype());
  backend::SoftmaxOutputs p{empty(scores.shape(), like(scores, compute)), Tensor()};
  p.out = out_dtype == compute ? p.probs : empty(scores.shape(), like(scores, out_dtype));
  const Rows r = rows_of(scores);
  if (r.rows == 0) return p;
  STRATA_LAUNCH(strata_attention_softmax_rows(
      float_type(compute, op), cuda_detail::storage_element_type(scores.dtype(), op),
      cuda_detail::storage_element_type(out_dtype, op), scores.data_ptr(), p.probs.data_ptr(), p.out.data_ptr(), r.rows,
      scores.size(-2), r.n, scale, causal, l.stream));
  return p;
}

Tensor attention_softmax_backward(const Tensor& grad, const Tensor& probs, double scale, bool causal) {
  const char* op = "attention softmax backward";
  Launch l(probs, op);
  Tensor dx = empty(grad.shape(), like(grad, grad.dtype()));
  const Rows r = rows_of(probs);
  if (r.rows == 0) return dx;
  STRATA_LAUNCH(strata_attention_softmax_backward_rows(
      float_type(probs.dtype(), op), cuda_detail::storage_element_type(grad.dtype(), op), grad.data_ptr(),
      probs.data_ptr(), dx.data_ptr(), r.rows, probs.size(-2), r.n, scale, causal, l.stream));
  return dx;
}

backend::CrossEntropyResult cross_entropy_forward(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                                                  int64_t classes) {
  Launch l(logits, "cross_entropy");
  const int64_t rows = logits.size(0), cols = logits.size(1);
  const DType compute = cuda_detail::compute_dtype_of(logits.dtype());
  const int32_t type = float_type(compute, "cross_entropy");
  backend::CrossEntropyResult r;
  r.stats = empty({rows, 2}, like(logits, compute));
  Tensor row_loss = empty({rows}, like(logits, DType::Float64));
  static_assert(sizeof(StrataCrossEntropyStatus) == 3 * sizeof(int64_t));
  Tensor status = empty({3}, like(logits, DType::Int64));
  STRATA_LAUNCH(strata_cross_entropy_rows(
      type, cuda_detail::storage_element_type(logits.dtype(), "cross_entropy"), index_type(targets.dtype()),
      logits.data_ptr(), targets.data_ptr(), rows, cols, classes, ignore_index, r.stats.data_ptr(),
      static_cast<double*>(row_loss.data_ptr()), static_cast<StrataCrossEntropyStatus*>(status.data_ptr()), l.stream));
  // The count is the host's (backward scales by it), so this waits for the kernels.
  const std::vector<int64_t> words = status.to_vector<int64_t>();
  StrataCrossEntropyStatus s;
  std::memcpy(&s, words.data(), sizeof s);
  if (s.first_bad_row != std::numeric_limits<long long>::max()) {
    const int64_t row = s.first_bad_row;
    const int64_t v = static_cast<int64_t>(targets.select(0, row).item());
    STRATA_FAIL("cross_entropy: target ", v, " at position ", row, " is out of range for logits with ", classes,
                " classes (expected [0, ", classes, ") or ignore_index ", ignore_index, ")");
  }
  r.count = static_cast<int64_t>(s.count);
  r.loss = full({}, r.count > 0 ? s.total / static_cast<double>(r.count) : 0.0, like(logits, compute));
  return r;
}

Tensor cross_entropy_backward(const Tensor& grad_loss, const Tensor& logits, const Tensor& targets, const Tensor& stats,
                              int64_t ignore_index, int64_t count, int64_t classes) {
  Launch l(logits, "cross_entropy backward");
  const int64_t rows = logits.size(0), cols = logits.size(1);
  Tensor dx = empty_like(logits);
  if (rows == 0) return dx;
  const double coef = count > 0 ? grad_loss.item() / static_cast<double>(count) : 0.0;
  const char* op = "cross_entropy backward";
  STRATA_LAUNCH(strata_cross_entropy_backward_rows(
      float_type(cuda_detail::compute_dtype_of(logits.dtype()), op),
      cuda_detail::storage_element_type(logits.dtype(), op), index_type(targets.dtype()), logits.data_ptr(),
      targets.data_ptr(), stats.data_ptr(), rows, cols, classes, ignore_index, coef, dx.data_ptr(), l.stream));
  return dx;
}

backend::LayerNormResult layer_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                                            DType out_dtype) {
  Launch l(x, "layer_norm");
  const Rows r = rows_of(x);
  const DType compute = cuda_detail::compute_dtype_of(x.dtype());
  backend::LayerNormResult out{empty(x.shape(), like(x, out_dtype)), empty({r.rows}, like(x, compute)),
                               empty({r.rows}, like(x, compute))};
  if (r.rows == 0) return out;
  const Tensor w = weight.defined() ? weight : full({r.n}, 1.0, like(x, compute));
  const Tensor b = bias.defined() ? bias : zeros({r.n}, like(x, compute));
  STRATA_LAUNCH(strata_layer_norm_rows(
      float_type(compute, "layer_norm"), cuda_detail::storage_element_type(x.dtype(), "layer_norm"),
      cuda_detail::storage_element_type(out_dtype, "layer_norm"), x.data_ptr(), w.data_ptr(), b.data_ptr(), r.rows, r.n,
      eps, out.out.data_ptr(), out.mean.data_ptr(), out.rstd.data_ptr(), l.stream));
  return out;
}

backend::LayerNormGrads layer_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& weight,
                                            const Tensor& mean, const Tensor& rstd, bool need_dx, bool need_dweight,
                                            bool need_dbias) {
  const char* op = "layer_norm backward";
  Launch l(x, op);
  const Rows r = rows_of(x);
  const DType compute = cuda_detail::compute_dtype_of(x.dtype());
  backend::LayerNormGrads g;
  if (need_dx) g.dx = empty_like(x);
  if (need_dweight) g.dweight = zeros({r.n}, like(x, compute));
  if (need_dbias) g.dbias = zeros({r.n}, like(x, compute));
  if (r.rows == 0) return g;
  const bool need_params = need_dweight || need_dbias;
  Tensor partials = need_params ? empty({strata_kernels::column_blocks(r.rows), 2 * r.n}, like(x, compute)) : Tensor();
  const Tensor w = weight.defined() ? weight : full({r.n}, 1.0, like(x, compute));
  STRATA_LAUNCH(strata_layer_norm_backward(
      float_type(compute, op), cuda_detail::storage_element_type(x.dtype(), op),
      cuda_detail::storage_element_type(grad.dtype(), op), grad.data_ptr(), x.data_ptr(), w.data_ptr(), mean.data_ptr(),
      rstd.data_ptr(), r.rows, r.n, need_dx ? g.dx.data_ptr() : nullptr, need_params ? partials.data_ptr() : nullptr,
      need_dweight ? g.dweight.data_ptr() : nullptr, need_dbias ? g.dbias.data_ptr() : nullptr, l.stream));
  return g;
}

backend::RmsNormResult rms_norm_forward(const Tensor& x, const Tensor& weight, double eps, DType out_dtype) {
  const char* op = "rms_norm";
  Launch l(x, op);
  const Rows r = rows_of(x);
  const DType compute = cuda_detail::compute_dtype_of(x.dtype());
  backend::RmsNormResult out{empty(x.shape(), like(x, out_dtype)), empty({r.rows}, like(x, compute))};
  if (r.rows == 0) return out;
  const Tensor w = weight.defined() ? weight : full({r.n}, 1.0, like(x, compute));
  STRATA_LAUNCH(strata_rms_norm_rows(float_type(compute, op), cuda_detail::storage_element_type(x.dtype(), op),
                                     cuda_detail::storage_element_type(out_dtype, op), x.data_ptr(), w.data_ptr(),
                                     r.rows, r.n, eps, out.out.data_ptr(), out.rstd.data_ptr(), l.stream));
  return out;
}

backend::RmsNormGrads rms_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                                        bool need_dx, bool need_dweight) {
  const char* op = "rms_norm backward";
  Launch l(x, op);
  const Rows r = rows_of(x);
  const DType compute = cuda_detail::compute_dtype_of(x.dtype());
  backend::RmsNormGrads g;
  if (need_dx) g.dx = empty_like(x);
  if (need_dweight) g.dweight = zeros({r.n}, like(x, compute));
  if (r.rows == 0) return g;
  Tensor partials = need_dweight ? empty({strata_kernels::column_blocks(r.rows), r.n}, like(x, compute)) : Tensor();
  const Tensor w = weight.defined() ? weight : full({r.n}, 1.0, like(x, compute));
  STRATA_LAUNCH(strata_rms_norm_backward(
      float_type(compute, op), cuda_detail::storage_element_type(x.dtype(), op),
      cuda_detail::storage_element_type(grad.dtype(), op), grad.data_ptr(), x.data_ptr(), w.data_ptr(), rstd.data_ptr(),
      r.rows, r.n, need_dx ? g.dx.data_ptr() : nullptr, need_dweight ? partials.data_ptr() : nullptr,
      need_dweight ? g.dweight.data_ptr() : nullptr, l.stream));
  return g;
}

}  // namespace strata::cuda_ops
