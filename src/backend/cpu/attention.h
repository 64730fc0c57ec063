#pragma once
// Scaled dot-product attention per (batch, head), GEMMs for the products, the mask and softmax
// fused in between. Grouped-query heads read their kv head in place. With a causal mask, work
// on the masked part is skipped block-wise.
#include "strata/tensor/tensor.h"

namespace strata::cpu {

struct AttentionParams {
  bool causal = false;  // query i sees keys j <= Tk - Tq + i
  double scale = 1.0;
  Tensor mask;  // additive, a [B, H, Tq, Tk] view of q's dtype (any strides, 0 included), or undefined
};

// q, out [B, H, Tq, D]; k, v [B, Hkv, Tk, D], H % Hkv == 0, each with gemm::row_major_in_place
// (../gemm_plan.h): unit stride along D, a row stride >= D (out is written). probs:
// [B, H, Tq, Tk] contiguous, receiving the attention probabilities for backward, or
// undefined (then a per-thread scratch is used). Causally masked entries of probs are zero
// up to the end of the row's block (an internal block size) and unspecified beyond;
// backward reads only the defined part.
void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& params,
                       const Tensor& out, const Tensor& probs);

// grad_out as q, probs from attention_forward (params.mask is not read). Writes dq (as q),
// dk and dv (as k, summed over the query heads of each kv head); any may be undefined.
//   dV = P^T dO, dP = dO V^T, dS = P * (dP - rowsum(dP * P)), dQ = dS K s, dK = dS^T Q s.
void attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& probs,
                        const AttentionParams& params, const Tensor& dq, const Tensor& dk, const Tensor& dv);

}  // namespace strata::cpu
