#pragma once
// The cuDNN 9 graphs of fused scaled-dot-product attention, forward and backward, as the
// pattern cuDNN's flash-attention engines match: products through matmul nodes, the softmax
// written out with reductions and pointwise nodes, the causal mask as generated row and
// column indices. Built without a GPU (tested on the CPU up to the operation graph); the
// plans and their execution are in cudnn_attention.cpp.
//
// Forward:  S = scale * Q K^T, masked (causal) to -inf, softmax along keys, O = P V, and the
//           per-row statistic Stats = max + log(sum exp(S - max)) (float32, [B, H, Tq, 1]).
// Backward: P is recomputed as exp(S - Stats); with sum_i = rowsum(dO * O):
//           dV = P^T dO, dS = scale * P * (dO V^T - sum), dQ = dS K, dK = dS^T Q.
#include <cstdint>
#include <vector>

#include "backend/cuda/cudnn_backend.h"

namespace strata::cudnn {

// The variant pack's tensors. Scale, NegInf and One are host scalars (by value); SoftmaxSum
// and DqAccum are float32 scratch the caller provides (zeroed).
enum AttentionUid : int64_t {
  kQ = 1,
  kK = 2,
  kV = 3,
  kO = 4,
  kStats = 5,
  kScale = 6,
  kNegInf = 7,
  kDo = 8,
  kOne = 9,
  kDq = 10,
  kDk = 11,
  kDv = 12,
  kSoftmaxSum = 13,
  kDqAccum = 14,
};

// One attention problem: [B, H, Tq, D] queries against [B, H, Tk, D] keys and values (as many
// key heads as query heads), in `io` (bf16 or fp16), every tensor's strides in elements.
struct AttentionGeometry {
  int64_t batch = 0, heads = 0, tq = 0, tk = 0, dim = 0;
  cudnnDataType_t io = CUDNN_DATA_BFLOAT16;
  bool causal = false;
  std::vector<int64_t> q_strides, k_strides, v_strides, o_strides;
  std::vector<int64_t> do_strides;  // backward only; dQ, dK and dV are packed
};

// A built graph's operations, every descriptor they refer to kept alive with them, and the
// uids of the graph's real tensors (the variant pack must name exactly these).
struct AttentionGraph {
  std::vector<Desc> ops;
  std::vector<Desc> tensors;
  std::vector<int64_t> uids;
};

AttentionGraph attention_forward_graph(const AttentionGeometry& g);
AttentionGraph attention_backward_graph(const AttentionGeometry& g);

}  // namespace strata::cudnn
