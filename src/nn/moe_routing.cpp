#include "strata/nn/moe_routing.h"

#include <cmath>

#include "strata/ops.h"
#include "strata/tensor/factory.h"

namespace strata::nn {

int64_t expert_capacity(int64_t tokens, int64_t top_k, int64_t num_experts, double factor) {
  STRATA_CHECK(factor > 0.0 && std::isfinite(factor), "MoE: capacity_factor must be positive and finite, got ", factor);
  STRATA_CHECK(tokens >= 0 && top_k >= 1 && num_experts >= 1, "expert_capacity: tokens ", tokens, ", top_k ", top_k,
               " and num_experts ", num_experts, " must be non-negative, positive and positive");
  const double slots = static_cast<double>(top_k * tokens) / static_cast<double>(num_experts) * factor;
  return static_cast<int64_t>(std::ceil(slots));
}

MoEDispatch plan_dispatch(const Tensor& experts, int64_t num_experts, std::optional<int64_t> capacity) {
  STRATA_CHECK(experts.dim() == 2 && experts.dtype() == DType::Int64,
               "plan_dispatch: experts must be int64 [tokens, top_k], got ", experts.dtype(), " of shape ",
               experts.shape());
  STRATA_CHECK(num_experts >= 1, "plan_dispatch: num_experts must be at least 1, got ", num_experts);
  STRATA_CHECK(!capacity || *capacity >= 0, "plan_dispatch: capacity must be non-negative, got ", capacity.value_or(0));
  const int64_t N = experts.size(0), k = experts.size(1);
  const std::vector<int64_t> choice = experts.to(Device::cpu()).to_vector<int64_t>();
  MoEDispatch plan{.num_tokens = N,
                   .top_k = k,
                   .routed_per_expert = std::vector<int64_t>(static_cast<size_t>(num_experts), 0),
                   .kept_per_expert = std::vector<int64_t>(static_cast<size_t>(num_experts), 0),
                   .capacity = capacity,
                   .dropped = 0,
                   .token_index = {},
                   .gate_index = {}};
  // Per expert, its kept slots as (token, gate position), in the order (choice rank, token).
  std::vector<std::vector<int64_t>> tokens(static_cast<size_t>(num_experts)), gates(tokens.size());
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t n = 0; n < N; ++n) {
      const int64_t slot = n * k + i, e = choice[static_cast<size_t>(slot)];
      STRATA_CHECK(e >= 0 && e < num_experts, "plan_dispatch: token ", n, " choice ", i, " is expert ", e,
                   ", outside [0, ", num_experts, ")");
      const auto ue = static_cast<size_t>(e);
      ++plan.routed_per_expert[ue];
      if (capacity && plan.kept_per_expert[ue] >= *capacity) {
        ++plan.dropped;
        continue;
      }
      ++plan.kept_per_expert[ue];
      tokens[ue].push_back(n);
      gates[ue].push_back(slot);
    }
  }
  std::vector<int64_t> token_index, gate_index;
  for (size_t e = 0; e < tokens.size(); ++e) {
    token_index.insert(token_index.end(), tokens[e].begin(), tokens[e].end());
    gate_index.insert(gate_index.end(), gates[e].begin(), gates[e].end());
  }
  const auto S = static_cast<int64_t>(token_index.size());
  plan.token_index = from_vector(token_index, {S}).to(experts.device());
  plan.gate_index = from_vector(gate_index, {S}).to(experts.device());
  return plan;
}

Tensor dispatch_tokens(const Tensor& x, const MoEDispatch& plan) {
  STRATA_CHECK(x.dim() == 2 && x.size(0) == plan.num_tokens, "dispatch_tokens: x must be [", plan.num_tokens,
               ", C] (the plan's tokens), got shape ", x.shape());
  return index_select(x, 0, plan.token_index);
}

Tensor combine_tokens(const Tensor& expert_out, const Tensor& gates, const MoEDispatch& plan) {
  const int64_t N = plan.num_tokens, k = plan.top_k, S = plan.token_index.numel();
  STRATA_CHECK(gates.dim() == 2 && gates.size(0) == N && gates.size(1) == k, "combine_tokens: gates must be [", N, ", ",
               k, "], got shape ", gates.shape());
  STRATA_CHECK(expert_out.dim() == 2 && expert_out.size(0) == S, "combine_tokens: expert_out must be [", S,
               ", C] (the plan's kept slots), got shape ", expert_out.shape());
  Tensor weight = index_select(gates.reshape({N * k}), 0, plan.gate_index).view({S, 1});
  Tensor weighted = mul(expert_out, weight);
  Tensor out = zeros({N, expert_out.size(1)}, {.dtype = expert_out.dtype(), .device = expert_out.device()});
  return index_add(out, 0, plan.token_index, weighted);
}

Tensor load_balancing_loss(const Tensor& probs, const std::vector<int64_t>& routed_per_expert, int64_t top_k) {
  STRATA_CHECK(probs.dim() == 2, "load_balancing_loss: probs must be [tokens > 0, ", routed_per_expert.size(),
               "] (one column per expert), got shape ", probs.shape());
  return load_balancing_loss(probs, routed_per_expert, top_k, probs.size(0));
}

Tensor load_balancing_loss(const Tensor& probs, const std::vector<int64_t>& routed_per_expert, int64_t top_k,
                           int64_t routed_tokens) {
  const auto E = static_cast<int64_t>(routed_per_expert.size());
  STRATA_CHECK(probs.dim() == 2 && probs.size(1) == E && probs.size(0) > 0 && top_k >= 1,
               "load_balancing_loss: probs must be [tokens > 0, ", E, "] (one column per expert), got shape ",
               probs.shape(), " with top_k ", top_k);
  STRATA_CHECK(routed_tokens >= 1, "load_balancing_loss: routed_tokens must be at least 1, got ", routed_tokens);
  const auto slots = static_cast<double>(routed_tokens * top_k);
  std::vector<double> fraction(routed_per_expert.size());
  for (size_t e = 0; e < fraction.size(); ++e) fraction[e] = static_cast<double>(routed_per_expert[e]) / slots;
  Tensor f = from_vector(fraction, {E}, {.dtype = DType::Float64}).to(probs.device());
  if (probs.dtype() != DType::Float64) f = f.to(probs.dtype());
  return mul(sum(mul(mean(probs, {0}), f)), static_cast<double>(E));
}

Tensor router_z_loss(const Tensor& logits) {
  STRATA_CHECK(logits.dim() == 2 && logits.size(0) > 0,
               "router_z_loss: logits must be [tokens > 0, experts], got shape ", logits.shape());
  Tensor lse = logsumexp(logits, {1});
  return mean(mul(lse, lse));
}

}  // namespace strata::nn
