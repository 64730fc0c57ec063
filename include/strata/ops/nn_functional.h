#pragma once
// Neural-network ops with fused forward and backward kernels. Differentiable.
//
// All take float32 or float64 CPU tensors (index tensors: int32 or int64) and accept
// non-contiguous views. Bad arguments throw strata::Error naming the op and the offending
// tensor, shape or index.
//
// Parameters stored in 16 bits: embedding's weight, layer_norm's weight and bias and
// rms_norm's weight may be
// bfloat16/float16 where the op computes in float32 (embedding: then its output is float32).
// The op converts such a parameter into a float32 temporary for its forward only and, where
// backward needs the value, converts it again from the 16-bit tensor then (whose storage may
// be released and reallocated in between, as ZeRO-3 does). Its gradient is the float32
// gradient rounded once to its dtype. Results equal op(.., param.to(Float32)) bit for bit,
// without keeping that float32 copy alive until backward.
#include <cstdint>
#include <optional>

#include "strata/core/random.h"
#include "strata/tensor/tensor.h"

namespace strata {

// weight [vocab, dim] (float32/float64, or 16-bit: float32 output), indices int32/int64 of
// any shape -> [indices.shape.., dim].
// An index outside [0, vocab) throws, naming its value, its position and vocab. The
// weight gradient is a dense [vocab, dim] tensor, summed deterministically.
// padding_idx (in [-vocab, vocab), negative counts from the end, as torch's): that row is
// looked up as any other but its gradient is zero (torch.nn.functional.embedding's).
Tensor embedding(const Tensor& indices, const Tensor& weight, std::optional<int64_t> padding_idx = std::nullopt);

// int64 class indices of any shape -> int64 [indices.shape.., num_classes], 1 at each
// index's class, as torch.nn.functional.one_hot. num_classes -1 takes the largest index + 1
// (the indices must then be non-empty). An index that is negative or >= num_classes throws,
// naming its value and position. On CUDA the check reads the indices on the host (a
// synchronisation, as torch's). Not differentiable.
Tensor one_hot(const Tensor& indices, int64_t num_classes = -1);

// Normalises over the last dimension with the biased variance:
//   (x - mean) / sqrt(var + eps) * weight + bias
// weight and bias [last] (either may be undefined: no scale / no shift), of x's dtype, or
// 16-bit for a float32 x.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);

// Normalises over the last dimension by the root mean square (LLaMA's RMSNorm):
//   x / sqrt(mean(x^2) + eps) * weight
// weight [last] or undefined (no scale), of x's dtype, or 16-bit for a float32 x.
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps = 1e-6);

// --- rotary position embedding (RoPE), Hugging Face LLaMA layout ---
// Tables for positions [offset, offset + length): cos and sin of shape [length, head_dim],
// columns i and i + head_dim/2 both holding angle (offset + p) * theta^(-2i/head_dim). With a
// KV cache, the new tokens' tables start at offset = the number of cached positions.
// Angles are computed in double and rounded once to dtype (float32 or float64); Hugging Face
// computes them in float32, which differs by about position * 1e-7 in the angle.
struct RotaryTables {
  Tensor cos, sin;  // [length, head_dim]
};
RotaryTables rotary_tables(int64_t length, int64_t head_dim, double theta = 10000.0, int64_t offset = 0,
                           DType dtype = DType::Float32);

// x [..., T, D] (e.g. q or k as [B, H, T, D]; D even), cos and sin [T, D] of x's dtype, e.g.
// from rotary_tables: x * cos + rotate_half(x) * sin, rotate_half(x) = [-x[D/2:], x[:D/2]]
// (element j rotates with element j + D/2, as Hugging Face's LlamaForCausalLM weights expect).
// One fused pass; backward applies the transposed map (the inverse rotation). cos and sin
// are constants: they must not require grad. The result is contiguous.
Tensor rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin);

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
// not turn the averaged gradient into NaN. `classes` in [1, C] (-1: C): only the first
// `classes` columns are classes, as cross_entropy(logits.narrow(1, 0, classes), ..) but
// without copying the logits; the others (a padded vocabulary) take no part in the softmax
// and get gradient 0, and a target must be < classes.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100, int64_t classes = -1);

// q, k, v [B, H, T, D] -> [B, H, T, D]; causal mask, scale 1/sqrt(D): attention(q, k, v,
// {.causal = true}) with its checks for equal shapes. Fused: scores, mask,
// softmax and weighted sum per (batch, head) without materialising the masked half.
// q, k, v may be strided views (e.g. split from one [B, T, 3, H, D] projection); they are
// read in place when each [T, D] slice has unit stride along D.
// The result's memory is ordered [B, T, H, D] (it is a transposed view), so that merging
// the heads, out.transpose(1, 2).contiguous().view({B, T, H * D}), copies nothing; use
// reshape() or contiguous() rather than view() on the result itself.
// Backward keeps the [B, H, T, T] attention probabilities from forward (not when grad
// mode is off or no input requires grad).
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v);

// Scaled dot-product attention with grouped-query heads, an optional causal mask and an
// optional additive mask; fused per (batch, head) as causal_attention is.
//   q [B, H, Tq, D], k and v [B, Hkv, Tk, D] with H % Hkv == 0 -> [B, H, Tq, D].
// Query head h attends with kv head h / (H / Hkv) (Hkv == H: multi-head, 1: multi-query).
// causal: query i sits at position Tk - Tq + i (the queries are the last Tq of the Tk
// positions, as with a KV cache; Tq <= Tk) and sees keys j <= Tk - Tq + i. For Tq == Tk this
// is the usual lower triangle; for Tq < Tk it is aligned to the end as Hugging Face does with
// a cache (torch's scaled_dot_product_attention(is_causal=True) aligns it to the start).
// mask: broadcastable to [B, H, Tq, Tk] (e.g. [Tq, Tk] or [B, 1, 1, Tk] for padding); of q's
// dtype, added to the scaled scores before the softmax (-inf excludes a key), or Bool, true
// where the key takes part (torch's scaled_dot_product_attention convention; it becomes 0 /
// -inf in the mask's own shape). A row whose keys are all excluded is NaN, as in torch. The
// mask is a constant (must not require grad).
// scale: multiplies q.k before the mask; default 1/sqrt(D).
// q, k, v may be strided views (read in place when each [T, D] slice has unit stride along
// D); the result's memory is ordered [B, Tq, H, D], as causal_attention's. Backward keeps the
// [B, H, Tq, Tk] probabilities; dk and dv sum over the query heads sharing a kv head.
struct AttentionOptions {
  bool causal = false;
  Tensor mask = {};
  std::optional<double> scale = std::nullopt;
};
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options = {});

// Zeroes elements with probability p and scales the rest by 1/(1-p) when `train`.
// p must be in [0, 1). With train == false or p == 0 it returns x itself and draws no
// random numbers. Otherwise the mask comes from Philox keyed by (gen's seed, one
// gen.next_offset()) and the element's row-major position, so it is reproducible from the
// generator state and the same for any thread count; backward regenerates it.
// gen == nullptr uses default_generator().
Tensor dropout(const Tensor& x, double p, bool train, Generator* gen = nullptr);

}  // namespace strata
