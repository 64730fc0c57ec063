#include "strata/nn/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "strata/ops.h"

namespace strata::nn {

void check_moe_config(const MoEConfig& c, int64_t ep) {
  STRATA_CHECK(c.num_experts >= 1, "MoE: num_experts must be at least 1, got ", c.num_experts);
  STRATA_CHECK(c.top_k >= 1 && c.top_k <= c.num_experts, "MoE: top_k ", c.top_k, " must lie in [1, num_experts] = [1, ",
               c.num_experts, "] (each token picks top_k distinct experts)");
  STRATA_CHECK(c.hidden_size >= 1 && c.intermediate_size >= 1, "MoE: hidden_size ", c.hidden_size,
               " and intermediate_size ", c.intermediate_size, " must be positive");
  STRATA_CHECK(!c.capacity_factor || (*c.capacity_factor > 0.0 && std::isfinite(*c.capacity_factor)),
               "MoE: capacity_factor must be positive and finite (or unset for dropless routing), got ",
               c.capacity_factor.value_or(0.0));
  STRATA_CHECK(c.aux_loss_coef >= 0.0 && c.z_loss_coef >= 0.0, "MoE: aux_loss_coef ", c.aux_loss_coef,
               " and z_loss_coef ", c.z_loss_coef, " must be non-negative");
  STRATA_CHECK(c.expert_parallel_degree == 1 || c.expert_parallel_degree == ep || ep == 1,
               "MoE: expert_parallel_degree ", c.expert_parallel_degree, " differs from the group's degree ", ep);
  ep = std::max(ep, c.expert_parallel_degree);
  STRATA_CHECK(c.expert_parallel_rank >= 0 && c.expert_parallel_rank < ep, "MoE: expert_parallel_rank ",
               c.expert_parallel_rank, " must lie in [0, expert_parallel_degree = ", ep, ")");
  STRATA_CHECK(ep >= 1 && c.num_experts % ep == 0, "MoE: the expert-parallel degree ", ep, " must divide num_experts ",
               c.num_experts, " (each rank holds num_experts / degree experts)");
}

SwiGLUExpert::SwiGLUExpert(int64_t C, int64_t I, const InitOptions& init, LayerFactory& factory) {
  w1 = register_module("w1", factory.column(C, I, false, init));
  w2 = register_module("w2", factory.row_partial(I, C, init));
  w3 = register_module("w3", factory.column(C, I, false, init));
}

Tensor SwiGLUExpert::forward(const Tensor& x) {
  auto hooks = forward_hooks();
  return w2->forward(mul(silu(w1->forward(x)), w3->forward(x)));
}

MoE::MoE(const MoEConfig& config, const InitOptions& init, LayerFactory* factory)
    : config_(config), factory_(factory != nullptr ? factory : default_layer_factory().get()) {
  check_moe_config(config);
  const int64_t tp = factory_->degree();
  STRATA_CHECK(config.intermediate_size % tp == 0, "MoE: the tensor-parallel degree ", tp,
               " must divide intermediate_size ", config.intermediate_size, " (each expert's width is split)");
  gate = register_module("gate", std::make_shared<Linear>(config.hidden_size, config.num_experts, false, init));
  experts = register_module("experts", std::make_shared<ModuleDict>());
  for (int64_t e = first_local_expert(); e < first_local_expert() + num_local_experts(); ++e)
    experts->insert(std::to_string(e),
                    std::make_shared<SwiGLUExpert>(config.hidden_size, config.intermediate_size, init, *factory_));
}

SwiGLUExpert& MoE::expert(size_t e) const {
  const std::string key = std::to_string(e);
  STRATA_CHECK(experts->contains(key), "MoE: expert ", e, " is not held here (this rank holds experts [",
               first_local_expert(), ", ", first_local_expert() + num_local_experts(), ") of ", config_.num_experts,
               ")");
  return *experts->at<SwiGLUExpert>(key);
}

MoERouting MoE::route(const Tensor& x) const {
  STRATA_CHECK(x.dim() == 2 && x.size(1) == config_.hidden_size, "MoE::route: x must be [tokens, ", config_.hidden_size,
               "], got shape ", x.shape());
  Tensor logits = gate->forward(x);
  const bool softmax_gating = config_.gating == MoEGating::Softmax;
  Tensor scores = softmax_gating ? softmax(logits, -1) : sigmoid(logits);
  auto [values, indices] = topk(scores, config_.top_k, -1);
  Tensor gates = config_.normalize_gates ? div(values, sum(values, {1}, true)) : values;
  Tensor probs = softmax_gating ? scores : div(scores, sum(scores, {1}, true));
  return {.logits = logits, .probs = probs, .gates = gates, .experts = indices};
}

std::optional<int64_t> MoE::capacity(int64_t tokens) const {
  if (!config_.capacity_factor) return std::nullopt;
  return expert_capacity(tokens, config_.top_k, config_.num_experts, *config_.capacity_factor);
}

Tensor MoE::run_experts(const Tensor& grouped, const std::vector<int64_t>& rows) {
  STRATA_CHECK(static_cast<int64_t>(rows.size()) == num_local_experts(), "MoE::run_experts: ", rows.size(),
               " row counts for ", num_local_experts(), " held experts");
  const int64_t total = std::accumulate(rows.begin(), rows.end(), int64_t{0});
  STRATA_CHECK(grouped.dim() == 2 && grouped.size(0) == total, "MoE::run_experts: grouped must be [", total,
               ", C] (the row counts' sum), got shape ", grouped.shape());
  // Every slot dropped (not reachable with a capacity of at least 1): no rows, none computed.
  if (total == 0) return grouped;
  // Idle experts (no rows) are not run, so they get no gradient and the optimizer skips them.
  Tensor partial = runs_grouped() ? run_grouped(grouped, rows) : run_one_by_one(grouped, rows);
  // Sequence parallel: forward reduce-scatters the combined tokens instead.
  return sequence_split_ ? partial : factory_->reduce_partial(partial);
}

bool MoE::runs_grouped() const {
  if (!config_.grouped_experts) return false;
  const auto plain = [](const Linear& l) {
    return l.is_local_product() && !l.has_forward_hooks() && !l.bias.defined();
  };
  for (int64_t e = 0; e < num_local_experts(); ++e) {
    const SwiGLUExpert& ex = expert(static_cast<size_t>(first_local_expert() + e));
    if (ex.has_forward_hooks() || !plain(*ex.w1) || !plain(*ex.w2) || !plain(*ex.w3)) return false;
  }
  return true;
}

Tensor MoE::run_grouped(const Tensor& grouped, const std::vector<int64_t>& rows) {
  std::vector<Tensor> w1, w2, w3;
  for (int64_t e = 0; e < num_local_experts(); ++e) {
    const SwiGLUExpert& ex = expert(static_cast<size_t>(first_local_expert() + e));
    w1.push_back(ex.w1->weight);
    w2.push_back(ex.w2->weight);
    w3.push_back(ex.w3->weight);
  }
  const Tensor hidden = mul(silu(grouped_linear(grouped, rows, w1)), grouped_linear(grouped, rows, w3));
  return grouped_linear(hidden, rows, w2);
}

Tensor MoE::run_one_by_one(const Tensor& grouped, const std::vector<int64_t>& rows) {
  std::vector<Tensor> out;
  int64_t offset = 0;
  for (size_t e = 0; e < rows.size(); ++e) {
    if (rows[e] == 0) continue;
    out.push_back(expert(static_cast<size_t>(first_local_expert()) + e).forward(grouped.narrow(0, offset, rows[e])));
    offset += rows[e];
  }
  return out.size() == 1 ? out.front() : cat(out, 0);
}

Tensor MoE::forward(const Tensor& x) {
  auto hooks = forward_hooks();
  STRATA_CHECK(x.dim() >= 1 && x.size(-1) == config_.hidden_size, "MoE: input must be [.., ", config_.hidden_size,
               "], got shape ", x.shape());
  // Sequence parallelism: x [B, T / n, C] is this rank's piece; every rank routes the whole
  // sequence (gathered; backward reduce-scatters the input gradient, whose router part is
  // then partial too: the experts' outputs are summed only after the gates weigh them).
  sequence_split_ = factory_->sequence_parallel_now();
  STRATA_CHECK(!sequence_split_ || x.dim() == 3, "MoE: under sequence parallelism the input must be [batch, ",
               "sequence piece, ", config_.hidden_size, "], got shape ", x.shape());
  const Tensor whole = sequence_split_ ? factory_->enter_region(x) : x;
  Tensor flat = whole.reshape({-1, config_.hidden_size});
  const int64_t N = flat.size(0);
  STRATA_CHECK(N > 0, "MoE: input of shape ", x.shape(), " holds no tokens");
  MoERouting r = route(flat);
  // Without it, the experts' path only: the router's input gradient is whole on every rank.
  Tensor tokens = sequence_split_ ? flat : factory_->enter_region(flat);
  Tensor y;
  if (dispatcher_) {
    y = dispatcher_->dispatch(*this, tokens, r, stats_);
  } else {
    STRATA_CHECK(config_.expert_parallel_degree == 1, "MoE: this layer holds ", num_local_experts(), " of ",
                 config_.num_experts, " experts (expert_parallel_degree ", config_.expert_parallel_degree,
                 ") but has no expert dispatcher (parallel::ExpertParallel)");
    MoEDispatch plan = plan_dispatch(r.experts, config_.num_experts, capacity(N));
    y = combine_tokens(run_experts(dispatch_tokens(tokens, plan), plan.kept_per_expert), r.gates, plan);
    stats_.tokens_per_expert = plan.routed_per_expert;
    stats_.kept_per_expert = plan.kept_per_expert;
    stats_.capacity = plan.capacity;
    stats_.dropped = plan.dropped;
  }
  balance_counts(N);
  stats_.load_balancing_loss =
      load_balancing_loss(r.probs, stats_.balance_tokens_per_expert, config_.top_k, stats_.balance_tokens);
  stats_.z_loss = router_z_loss(r.logits);
  return sequence_split_ ? factory_->reduce_partial(y.reshape(whole.shape())) : y.reshape(x.shape());
}

void MoE::balance_counts(int64_t tokens) {
  stats_.balance_tokens_per_expert = stats_.tokens_per_expert;
  stats_.balance_tokens = tokens;
  // No load-balancing loss to form: no collective either (every rank has the same config).
  if (!count_reducer_ || config_.aux_loss_coef == 0.0) return;
  std::vector<int64_t> counts = stats_.tokens_per_expert;
  counts.push_back(tokens);
  const std::vector<int64_t> summed = count_reducer_(counts);
  STRATA_CHECK(summed.size() == counts.size(), "MoE: the routing-count reducer returned ", summed.size(),
               " counts for ", counts.size(), " (one per expert, then the tokens)");
  for (size_t i = 0; i < counts.size(); ++i)
    STRATA_CHECK(summed[i] >= counts[i], "MoE: the routing-count reducer returned ", summed[i], " at position ", i,
                 ", below this rank's own ", counts[i], " (it must sum the counts over the ranks)");
  stats_.balance_tokens = summed.back();
  stats_.balance_tokens_per_expert.assign(summed.begin(), summed.end() - 1);
}

Tensor MoE::auxiliary_loss() const {
  if ((config_.aux_loss_coef == 0.0 && config_.z_loss_coef == 0.0) || !stats_.z_loss.defined()) return {};
  Tensor aux = add(mul(stats_.load_balancing_loss, config_.aux_loss_coef), mul(stats_.z_loss, config_.z_loss_coef));
  if (!sequence_split_) return aux;
  // Every rank computed it whole, and its gradients leave through paths summed over the
  // ranks (the input's reduce-scatter, the replicated router's gradient hook): each rank
  // back-propagates 1/n of it; the value stays.
  const double n = static_cast<double>(factory_->degree());
  return add(mul(aux, 1.0 / n), mul(aux.detach(), 1.0 - 1.0 / n));
}

}  // namespace strata::nn
