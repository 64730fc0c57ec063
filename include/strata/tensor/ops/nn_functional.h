#pragma once
// Neural-network ops with fused forward and backward kernels. Differentiable.
#include <cstdint>

#include "strata/core/random.h"
#include "strata/tensor/tensor.h"

namespace strata {

// weight [vocab, dim], indices int32/int64 of any shape -> [indices.shape.., dim].
Tensor embedding(const Tensor& indices, const Tensor& weight);
// Normalises over the last dimension; weight and bias [last] (either may be undefined).
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
Tensor gelu(const Tensor& x);  // tanh approximation, as GPT-2
Tensor relu(const Tensor& x);
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
// logits [N, C], targets [N] int32/int64; mean over targets != ignore_index -> shape [].
// Fused with log-softmax.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100);
// q, k, v [B, H, T, D] -> [B, H, T, D]; causal mask, scale 1/sqrt(D). Fused: scores, mask,
// softmax and weighted sum per (batch, head) without materialising the masked half.
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v);
// Zeroes elements with probability p and scales the rest by 1/(1-p) when `train`.
Tensor dropout(const Tensor& x, double p, bool train, Generator* gen = nullptr);

}  // namespace strata
