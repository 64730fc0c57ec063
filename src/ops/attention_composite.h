#pragma once
// Attention built from other ops (batched matmul, attention_softmax, matmul), so that any
// device with those ops runs it and autograd differentiates it: strata's own CUDA
// attention until a fused kernel (cuDNN) takes over. The CPU keeps its fused kernel
// (cpu/attention.h); the unit tests run this composition on the CPU against it.
#include "strata/tensor/tensor.h"

namespace strata::detail {

// Per row of scores [.., tq, tk]: softmax(scale * s) over the keys its query may see (all,
// or under `causal` the first row % tq + 1 + tk - tq), 0 elsewhere. Differentiable in scores.
Tensor attention_softmax(const Tensor& scores, double scale, bool causal);

// q [B, H, Tq, D], k and v [B, Hkv, Tk, D], H a multiple of Hkv (grouped-query heads share
// their kv head); mask undefined or additive, broadcastable to [B, H, Tq, Tk]. Arguments
// are checked by attention(). Returns [B, H, Tq, D].
Tensor composite_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale,
                           const Tensor& mask);

}  // namespace strata::detail
