#pragma once
// Softmax, log-softmax and cross-entropy: numerically stable (the row maximum is
// subtracted before exp), forward and backward each one pass over the data per row.
#include <cstdint>

#include "backend/kernel_types.h"

namespace strata::cpu {

// x contiguous float32/float64, normalised along `dim` (already in [0, x.dim())). The last
// dimension is the fast path; other dimensions are processed as [outer, n, inner] with
// the inner dimension vectorised, so no transpose is materialised.
Tensor softmax_forward(const Tensor& x, int64_t dim, bool log);
// out is softmax_forward's result; grad contiguous with out's shape.
//   softmax:     dx = y * (g - sum(g * y))
//   log_softmax: dx = g - exp(y) * sum(g)
Tensor softmax_backward(const Tensor& grad, const Tensor& out, int64_t dim, bool log);
// Along the last dimension of contiguous 16-bit x: float32 math, the float32 values kept for
// backward (.probs) and their 16-bit rounding (.out) written in one pass. Backward: grad and
// the result 16-bit, y the float32 values.
backend::SoftmaxOutputs softmax_last16(const Tensor& x, bool log);
Tensor softmax_backward_last16(const Tensor& grad, const Tensor& y, bool log);

// Attention's probabilities from scores s [.., tq, tk] (contiguous): per row the softmax of
// scale * s over the keys its query may see (all, or causally the first
// row % tq + 1 + tk - tq), 0 elsewhere. Math: strata_kernels/common/row_softmax.h.
// Scores float32/float64 or 16-bit (float32 math); out_dtype the compute dtype or 16-bit.
backend::SoftmaxOutputs attention_softmax_forward(const Tensor& scores, double scale, bool causal, DType out_dtype);
// probs is the forward's output; grad contiguous with its shape.
// grad (and the result) in the output's dtype; probs the forward's compute-dtype probs.
Tensor attention_softmax_backward(const Tensor& grad, const Tensor& probs, double scale, bool causal);

using backend::CrossEntropyResult;
// logits contiguous [N, cols] (float32, float64, or 16-bit: float32 math, stats and loss, the
// gradient rounded once to the logits' dtype), targets contiguous int32/int64 [N]; the first
// `classes` (<= cols) columns are the classes, the rest padding that takes no part. Throws
// naming the first target outside [0, classes) that is not ignore_index. The loss is the mean
// over the counted targets, or 0 when every target is ignored.
CrossEntropyResult cross_entropy_forward(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                                         int64_t classes);
// d loss / d logits = (softmax(logits) - onehot(target)) * grad / count, zero on ignored
// rows and padding columns. grad_loss holds one element.
Tensor cross_entropy_backward(const Tensor& grad_loss, const Tensor& logits, const Tensor& targets, const Tensor& stats,
                              int64_t ignore_index, int64_t count, int64_t classes);

}  // namespace strata::cpu
