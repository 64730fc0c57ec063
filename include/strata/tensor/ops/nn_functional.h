#pragma once
// Neural-network ops with fused forward and backward kernels. Differentiable.
//
// All take float32 or float64 CPU tensors (index tensors: int32 or int64) and accept
// non-contiguous views. Bad arguments throw strata::Error naming the op and the offending
// tensor, shape or index.
//
// Parameters stored in 16 bits: embedding's weight and layer_norm's weight and bias may be
// bfloat16/float16 where the op computes in float32 (embedding: then its output is float32).
// The op converts such a parameter into a float32 temporary for its forward only and, where
// backward needs the value, converts it again from the 16-bit tensor then (whose storage may
// be released and reallocated in between, as ZeRO-3 does). Its gradient is the float32
// gradient rounded once to its dtype. Results equal op(.., param.to(Float32)) bit for bit,
// without keeping that float32 copy alive until backward.
#include <cstdint>

#include "strata/core/random.h"
#include "strata/tensor/tensor.h"

namespace strata {

// weight [vocab, dim] (float32/float64, or 16-bit: float32 output), indices int32/int64 of
// any shape -> [indices.shape.., dim].
// An index outside [0, vocab) throws, naming its value, its position and vocab. The
// weight gradient is a dense [vocab, dim] tensor, summed deterministically.
Tensor embedding(const Tensor& indices, const Tensor& weight);

// Normalises over the last dimension with the biased variance:
//   (x - mean) / sqrt(var + eps) * weight + bias
// weight and bias [last] (either may be undefined: no scale / no shift), of x's dtype, or
// 16-bit for a float32 x.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);

// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): the tanh approximation used by GPT-2,
// torch.nn.functional.gelu(x, approximate='tanh').
Tensor gelu(const Tensor& x);
Tensor relu(const Tensor& x);

// Along any dimension (negative counts from the end); numerically stable.
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

// logits [N, C], targets [N] int32/int64; mean over targets != ignore_index -> shape [].
// Fused with log-softmax. A target outside [0, C) that is not ignore_index throws, naming
// the target, its position and C. When every target is ignored the loss is 0 and the
// gradient is zero (torch returns NaN): a data-parallel shard made only of padding must
// not turn the averaged gradient into NaN.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100);

// q, k, v [B, H, T, D] -> [B, H, T, D]; causal mask, scale 1/sqrt(D). Fused: scores, mask,
// softmax and weighted sum per (batch, head) without materialising the masked half.
// q, k, v may be strided views (e.g. split from one [B, T, 3, H, D] projection); they are
// read in place when each [T, D] slice has unit stride along D.
// The result's memory is ordered [B, T, H, D] (it is a transposed view), so that merging
// the heads, out.transpose(1, 2).contiguous().view({B, T, H * D}), copies nothing; use
// reshape() or contiguous() rather than view() on the result itself.
// Backward keeps the [B, H, T, T] attention probabilities from forward (not when grad
// mode is off or no input requires grad).
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v);

// Zeroes elements with probability p and scales the rest by 1/(1-p) when `train`.
// p must be in [0, 1). With train == false or p == 0 it returns x itself and draws no
// random numbers. Otherwise the mask comes from Philox keyed by (gen's seed, one
// gen.next_offset()) and the element's row-major position, so it is reproducible from the
// generator state and the same for any thread count; backward regenerates it.
// gen == nullptr uses default_generator().
Tensor dropout(const Tensor& x, double p, bool train, Generator* gen = nullptr);

}  // namespace strata
