#pragma once
// Attention through cuDNN's fused flash-attention engines (cuda/fused_attention.cpp) where
// strata::cuda::fused_attention() is on and the problem fits them; device-neutral, so the
// choice (fused_attention_refusal) is unit-tested on the CPU.
#include <optional>
#include <string>

#include "strata/tensor/tensor.h"

namespace strata::detail {

// Why the fused attention does not take this call, empty when it does: the switch is off,
// not on CUDA, not 16-bit (float32 only under a 16-bit autocast scope), a mask, fewer kv
// heads than query heads, causal with Tq != Tk, D not a multiple of 8 or above 128, or an
// empty problem. Arguments are otherwise checked by attention().
std::string fused_attention_refusal(const Tensor& q, const Tensor& k, const Tensor& mask, bool causal);

// The fused attention with its backward recorded; nullopt when cuDNN takes no plan for it
// (the caller composes attention). Under a 16-bit autocast scope float32 q, k, v run in the
// scope's dtype and the result is float32 again.
std::optional<Tensor> fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale);

}  // namespace strata::detail
