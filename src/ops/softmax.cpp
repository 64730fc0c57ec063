// softmax, log_softmax and cross_entropy (kernels in src/backend/cpu/softmax).
#include "backend/cpu/softmax.h"

#include "backend/cuda/cuda_ops.h"
#include "backend/dispatch/device_dispatch.h"
#include "ops/autocast_cast.h"
#include "ops/nn_common.h"
#include "strata/autograd/function.h"
#include "strata/ops/nn_functional.h"

namespace strata {
namespace {

Tensor softmax_impl(const Tensor& x, int64_t dim, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  detail::check_nn_input(x, op, "input");
  STRATA_CHECK(x.dim() > 0, op, ": input is a scalar (shape []); it needs at least one dimension");
  const int64_t d = normalize_dim(dim, x.dim(), op);
  Tensor xc = detail::contiguous_data(x);
  Tensor out = detail::on_device(
      op, xc.device(), [&] { return cpu::softmax_forward(xc, d, log); },
      [&] { return cuda_ops::softmax_forward(xc, d, log); });
  if (autograd::needs_grad({x})) {
    Tensor saved = out.detach();
    autograd::record(log ? "LogSoftmaxBackward" : "SoftmaxBackward", {x}, {out}, {saved},
                     [saved, d, log, op](autograd::BackwardContext& ctx) {
                       Tensor g = detail::contiguous_data(ctx.grad());
                       return std::vector<Tensor>{detail::on_device(
                           op, saved.device(), [&] { return cpu::softmax_backward(g, saved, d, log); },
                           [&] { return cuda_ops::softmax_backward(g, saved, d, log); })};
                     });
  }
  return out;
}

// Along the last dimension of a 16-bit x: one kernel computes in float32, keeps the float32
// values for backward (as the float32 op's node keeps its output) and writes their 16-bit
// rounding; backward reads the 16-bit gradient and writes a 16-bit one. Other dimensions
// widen x and round the result (counted conversions).
Tensor softmax_16bit(const Tensor& x, int64_t dim, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  STRATA_CHECK(x.dim() > 0, op, ": input is a scalar (shape []); it needs at least one dimension");
  const int64_t d = normalize_dim(dim, x.dim(), op);
  if (d != x.dim() - 1)
    return detail::via_float32(x, x.dtype(), [d, log](const Tensor& w) { return softmax_impl(w, d, log); });
  Tensor xc = detail::contiguous_data(x);
  const backend::SoftmaxOutputs r = detail::on_device(
      op, xc.device(), [&] { return cpu::softmax_last16(xc, log); }, [&] { return cuda_ops::softmax_last16(xc, log); });
  if (autograd::needs_grad({x})) {
    Tensor saved = r.probs.detach();
    autograd::record(log ? "LogSoftmaxBackward" : "SoftmaxBackward", {x}, {r.out}, {saved},
                     [saved, log, op](autograd::BackwardContext& ctx) {
                       Tensor g = detail::contiguous_data(ctx.grad());
                       return std::vector<Tensor>{detail::on_device(
                           op, saved.device(), [&] { return cpu::softmax_backward_last16(g, saved, log); },
                           [&] { return cuda_ops::softmax_backward_last16(g, saved, log); })};
                     });
  }
  return r.out;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
  if (detail::sixteen_bit(x)) return softmax_16bit(x, dim, false);
  return softmax_impl(x, dim, false);
}
Tensor log_softmax(const Tensor& x, int64_t dim) {
  if (detail::sixteen_bit(x)) return softmax_16bit(x, dim, true);
  return softmax_impl(x, dim, true);
}

// 16-bit logits: the kernel reads them and computes in float32, giving a float32 loss
// (torch autocast's rule for losses); the logits' gradient is written in their dtype.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index, int64_t classes) {
  STRATA_CHECK(logits.defined(), "cross_entropy: logits are undefined");
  if (!detail::sixteen_bit(logits)) detail::check_nn_input(logits, "cross_entropy", "logits");
  STRATA_CHECK(logits.dim() == 2, "cross_entropy: logits must be [N, C], got shape ", logits.shape(),
               " (flatten the leading dimensions with view({-1, C}))");
  STRATA_CHECK(targets.defined(), "cross_entropy: targets are undefined");
  STRATA_CHECK(targets.dtype() == DType::Int32 || targets.dtype() == DType::Int64, "cross_entropy: targets have dtype ",
               targets.dtype(), "; int32 or int64 class indices expected");
  const Device device = detail::common_device("cross_entropy", {{"logits", logits}, {"targets", targets}});
  STRATA_CHECK(targets.dim() == 1 && targets.size(0) == logits.size(0), "cross_entropy: targets must be [N] = [",
               logits.size(0), "] for logits of shape ", logits.shape(), ", got shape ", targets.shape());
  STRATA_CHECK(logits.size(1) > 0 || logits.size(0) == 0, "cross_entropy: logits of shape ", logits.shape(),
               " have no classes");
  const int64_t cols = logits.size(1);
  if (classes < 0) classes = cols;
  STRATA_CHECK(classes <= cols && (classes > 0 || logits.size(0) == 0), "cross_entropy: classes ", classes,
               " must be in [1, ", cols, "] for logits of shape ", logits.shape(), " (-1: every column)");
  Tensor x = detail::contiguous_data(logits);
  Tensor t = targets.contiguous();
  backend::CrossEntropyResult r = detail::on_device(
      "cross_entropy", device, [&] { return cpu::cross_entropy_forward(x, t, ignore_index, classes); },
      [&] { return cuda_ops::cross_entropy_forward(x, t, ignore_index, classes); });
  if (autograd::needs_grad({logits})) {
    autograd::record(
        "CrossEntropyBackward", {logits}, {r.loss}, {x, t, r.stats},
        [x, t, stats = r.stats, ignore_index, count = r.count, classes](autograd::BackwardContext& ctx) {
          return std::vector<Tensor>{detail::on_device(
              "cross_entropy backward", x.device(),
              [&] { return cpu::cross_entropy_backward(ctx.grad(), x, t, stats, ignore_index, count, classes); },
              [&] { return cuda_ops::cross_entropy_backward(ctx.grad(), x, t, stats, ignore_index, count, classes); })};
        });
  }
  return r.loss;
}

}  // namespace strata
