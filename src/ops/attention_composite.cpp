#include "ops/attention_composite.h"

#include "backend/cpu/softmax.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/dispatch/device_dispatch.h"
#include "ops/nn_common.h"
#include "strata/autograd/function.h"
#include "strata/ops/elementwise.h"
#include "strata/ops/linalg.h"

namespace strata::detail {

// 16-bit scores: the kernel computes in float32 and writes the float32 probabilities
// (backward's operand, as a float32 softmax keeps them) and their 16-bit rounding (the
// output) in one pass; backward reads the 16-bit gradient and writes a 16-bit one.
Tensor attention_softmax(const Tensor& scores, double scale, bool causal) {
  const Tensor s = contiguous_data(scores);
  const DType out_dtype = scores.dtype();
  const backend::SoftmaxOutputs p = on_device(
      "attention softmax", s.device(), [&] { return cpu::attention_softmax_forward(s, scale, causal, out_dtype); },
      [&] { return cuda_ops::attention_softmax_forward(s, scale, causal, out_dtype); });
  const Tensor& probs = p.out;
  if (autograd::needs_grad({scores})) {
    const Tensor saved = p.probs.detach();
    autograd::record("AttentionSoftmaxBackward", {scores}, {probs}, {saved},
                     [saved, scale, causal](autograd::BackwardContext& ctx) {
                       const Tensor g = contiguous_data(ctx.grad());
                       return std::vector<Tensor>{on_device(
                           "attention softmax backward", saved.device(),
                           [&] { return cpu::attention_softmax_backward(g, saved, scale, causal); },
                           [&] { return cuda_ops::attention_softmax_backward(g, saved, scale, causal); })};
                     });
  }
  return probs;
}

Tensor composite_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale,
                           const Tensor& mask) {
  const int64_t batch = q.size(0), heads = q.size(1), tq = q.size(2), dim = q.size(3);
  const int64_t kv_heads = k.size(1), tk = k.size(2);
  const int64_t group = kv_heads > 0 ? heads / kv_heads : 1;
  // A group's query heads are consecutive, so [B, Hkv, group * Tq, D] puts each group's
  // queries beside the one kv head they share: two batched products, no repeated k or v.
  const Tensor qg = q.contiguous().view({batch, kv_heads, group * tq, dim});
  Tensor scores = matmul(qg, k.transpose(-1, -2)).view({batch, heads, tq, tk});
  double softmax_scale = scale;
  if (mask.defined()) {
    scores = add(mul(scores, scale), mask);
    softmax_scale = 1.0;
  }
  const Tensor probs = attention_softmax(scores, softmax_scale, causal);
  return matmul(probs.view({batch, kv_heads, group * tq, tk}), v).view({batch, heads, tq, dim});
}

}  // namespace strata::detail
