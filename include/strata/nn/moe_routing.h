#pragma once
// The steps of a mixture-of-experts layer between the router and the experts, each a free
// function so that expert parallelism (tokens exchanged over an ep group) and a grouped GEMM
// can replace one step without touching the others:
//   plan_dispatch   which (token, expert) slots each expert takes, grouped by expert, with
//                   the counts per expert (an all-to-all's sizes) and the slots dropped over
//                   capacity;
//   dispatch_tokens the tokens in that grouped order;
//   (the experts run on their contiguous groups: nn::MoE::run_experts);
//   combine_tokens  each expert output weighted by its gate and added back at its token.
// And the router's two auxiliary losses.
#include <cstdint>
#include <optional>
#include <vector>

#include "strata/tensor/tensor.h"

namespace strata::nn {

// Slots per expert for `tokens` tokens routed to `top_k` experts each among `num_experts`,
// with capacity factor `factor`: ceil(top_k * tokens / num_experts * factor). factor > 0.
int64_t expert_capacity(int64_t tokens, int64_t top_k, int64_t num_experts, double factor);

// The slots of one forward, grouped by expert (expert 0's first).
struct MoEDispatch {
  int64_t num_tokens = 0;
  int64_t top_k = 0;
  std::vector<int64_t> routed_per_expert;          // [E] slots the router sent to each expert
  std::vector<int64_t> kept_per_expert;            // [E] of those, the slots each expert computes
  std::optional<int64_t> capacity = std::nullopt;  // slots per expert; unset: dropless
  int64_t dropped = 0;                             // slots over capacity (their tokens skip that expert)
  Tensor token_index;                              // int64 [S]: the token of each kept slot, grouped by expert
  Tensor gate_index;                               // int64 [S]: its gate's position in gates.view({N * k})
};

// Groups the slots of `experts` (int64 [N, k], the router's choices; any device: read on
// the host) by expert. With a capacity, each expert keeps its first `capacity` slots in the
// order (choice rank, token): every first choice before any second choice (GShard's
// priority), then by token; the rest are dropped and counted. Every choice must lie in
// [0, num_experts): an error names the token and the value otherwise.
MoEDispatch plan_dispatch(const Tensor& experts, int64_t num_experts, std::optional<int64_t> capacity);

// x [N, C] -> [S, C]: the token of each kept slot, in the plan's grouped order.
Tensor dispatch_tokens(const Tensor& x, const MoEDispatch& plan);

// expert_out [S, C] (the experts' outputs in the plan's order) times each slot's gate
// (gates [N, k]) summed at its token -> [N, C]; a token whose slots were all dropped gets 0.
Tensor combine_tokens(const Tensor& expert_out, const Tensor& gates, const MoEDispatch& plan);

// The load-balancing loss of Switch Transformer / Mixtral in Megatron's normalisation:
// E * sum_e f_e * P_e, with f_e = routed_per_expert[e] / (N * k), the fraction of routed slots
// (before capacity) that went to e, and P_e = the mean over tokens of probs[:, e], probs [N, E]
// each row summing to 1. It is 1 for perfectly uniform routing. (transformers'
// load_balancing_loss_func computes k times this value, over every layer's tokens at once;
// model_family_mixtral.cpp maps the coefficients.) Differentiable in probs only.
Tensor load_balancing_loss(const Tensor& probs, const std::vector<int64_t>& routed_per_expert, int64_t top_k);
// The same with f_e = routed_per_expert[e] / (routed_tokens * top_k): counts over more tokens
// than probs holds (global-batch balancing: the counts summed over the data ranks, P_e still
// the mean over this rank's tokens). routed_tokens >= 1.
Tensor load_balancing_loss(const Tensor& probs, const std::vector<int64_t>& routed_per_expert, int64_t top_k,
                           int64_t routed_tokens);

// ST-MoE's router z-loss: the mean over tokens of logsumexp(logits [N, E])^2.
Tensor router_z_loss(const Tensor& logits);

}  // namespace strata::nn
