#pragma once
// Causal scaled dot-product attention per (batch, head), BLAS for the products, the
// softmax fused in between. Work on the masked upper triangle is skipped block-wise.
#include "strata/tensor/tensor.h"

namespace strata::cpu {

// q, k, v, out: [B, H, T, D] with gemm::row_major_in_place (../gemm_plan.h): each [T, D]
// slice has unit stride along D and a row stride >= D (out is written). probs: [B, H, T, T]
// contiguous, receiving the attention probabilities for backward, or undefined (then a
// per-thread scratch is used). Entries of probs above the diagonal are zero up to the end
// of the row's block (an internal block size) and unspecified beyond; backward reads only
// the defined part.
void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& probs);

// grad_out, q, k, v: [B, H, T, D] with gemm::row_major_in_place; probs from
// attention_forward. Writes dq, dk, dv ([B, H, T, D], row_major_in_place); any may be undefined.
//   dV = P^T dO, dP = dO V^T, dS = P * (dP - rowsum(dP * P)), dQ = dS K s, dK = dS^T Q s.
void attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& probs, const Tensor& dq, const Tensor& dk, const Tensor& dv);

}  // namespace strata::cpu
