#include "strata/parallel/expert_parallel.h"

#include <numeric>
#include <string>

#include "strata/autograd/grad_mode.h"
#include "strata/nn/moe_routing.h"
#include "strata/ops.h"
#include "strata/parallel/token_exchange.h"
#include "strata/tensor/factory.h"

namespace strata::parallel {
namespace {

using Counts = std::vector<int64_t>;

// What this rank learned from the count exchange: per source rank, its tokens and its slots
// per (held expert, choice rank), laid out [source][held expert][choice rank].
struct Received {
  Counts slots;              // [P * L * k]
  Counts rows_from;          // [P] rows each source sends (its out_split)
  int64_t total_tokens = 0;  // the ep group's tokens
};

// Slots per (expert, choice rank) of this rank's routing, [E * k].
Counts routed_by_choice(const Tensor& experts, int64_t E) {
  const int64_t k = experts.size(1);
  const Counts choice = experts.to(Device::cpu()).to_vector<int64_t>();
  Counts out(static_cast<size_t>(E * k), 0);
  for (size_t s = 0; s < choice.size(); ++s) {
    const int64_t e = choice[s], i = static_cast<int64_t>(s) % k;
    STRATA_CHECK(e >= 0 && e < E, "ExpertParallel: routed expert ", e, " outside [0, ", E, ")");
    ++out[static_cast<size_t>(e * k + i)];
  }
  return out;
}

// Sends each rank its experts' counts and this rank's token count (one int64 all_to_all_v).
Received exchange_counts(dist::ProcessGroup& group, const Counts& by_choice, int64_t L, int64_t k, int64_t tokens) {
  const int64_t P = group.size(), block = L * k + 1;
  Counts send;
  for (int64_t d = 0; d < P; ++d) {
    send.insert(send.end(), by_choice.begin() + d * L * k, by_choice.begin() + (d + 1) * L * k);
    send.push_back(tokens);
  }
  const Counts splits(static_cast<size_t>(P), block);
  // On the group's device (an NCCL group takes only its GPU's tensors).
  const Tensor sent = from_vector(send, {P * block}).to(group.tensor_device());
  const Counts got = all_to_all_v_rows(sent, group, splits, splits).to_vector<int64_t>();
  Received r;
  for (int64_t s = 0; s < P; ++s) {
    const auto first = got.begin() + s * block;
    r.slots.insert(r.slots.end(), first, first + L * k);
    r.rows_from.push_back(std::accumulate(first, first + L * k, int64_t{0}));
    r.total_tokens += *(first + L * k);
  }
  return r;
}

// The received rows each held expert keeps, grouped by expert, each in the order (choice
// rank, source rank, source row): one process's (choice rank, token) over the group's batch.
Counts keep_order(const Received& r, int64_t L, int64_t k, std::optional<int64_t> capacity, Counts& kept,
                  int64_t& dropped) {
  const auto P = static_cast<int64_t>(r.rows_from.size());
  // start[(s * L + j) * k + i]: where source s's slots for (held expert j, choice i) begin.
  Counts start(r.slots.size());
  int64_t offset = 0;
  for (size_t c = 0; c < r.slots.size(); ++c) {
    start[c] = offset;
    offset += r.slots[c];
  }
  Counts keep;
  kept.assign(static_cast<size_t>(L), 0);
  dropped = 0;
  for (int64_t j = 0; j < L; ++j)
    for (int64_t i = 0; i < k; ++i)
      for (int64_t s = 0; s < P; ++s) {
        const auto c = static_cast<size_t>((s * L + j) * k + i);
        for (int64_t row = 0; row < r.slots[c]; ++row) {
          if (capacity && kept[static_cast<size_t>(j)] >= *capacity) {
            ++dropped;
            continue;
          }
          ++kept[static_cast<size_t>(j)];
          keep.push_back(start[c] + row);
        }
      }
  return keep;
}

// The held experts on the received rows; rows not kept come back as zeros.
Tensor run_held_experts(nn::MoE& moe, const Tensor& received, const Counts& keep, const Counts& kept) {
  const auto S = static_cast<int64_t>(keep.size());
  Tensor index = from_vector(keep, {S}).to(received.device());
  Tensor out = moe.run_experts(index_select(received, 0, index), kept);
  Tensor back = zeros(received.shape(), {.dtype = received.dtype(), .device = received.device()});
  back = index_add(back, 0, index, out);
  // Every rank must take part in the combine exchange's backward: a rank whose experts got
  // no rows (and whose tokens need no gradient) would otherwise skip it and hang the others.
  if (grad_enabled() && !back.requires_grad()) back = back.detach().set_requires_grad(true);
  return back;
}

}  // namespace

Tensor ExpertParallel::dispatch(nn::MoE& moe, const Tensor& x, const nn::MoERouting& routing, nn::MoEStats& stats) {
  const nn::MoEConfig& config = moe.config();
  const int64_t P = group_.size(), E = config.num_experts, k = config.top_k, L = moe.num_local_experts();
  STRATA_CHECK(config.expert_parallel_degree == P && config.expert_parallel_rank == group_.rank(),
               "ExpertParallel on group '", group_.name(), "' (size ", P, ", rank ", group_.rank(),
               "): the MoE holds the experts of degree ", config.expert_parallel_degree, ", rank ",
               config.expert_parallel_rank, " (build its config with expert_parallel_config)");
  const Counts by_choice = routed_by_choice(routing.experts, E);
  const Received got = exchange_counts(group_, by_choice, L, k, x.size(0));
  const nn::MoEDispatch plan = nn::plan_dispatch(routing.experts, E, std::nullopt);
  Counts in_splits(static_cast<size_t>(P), 0);
  for (int64_t e = 0; e < E; ++e)
    in_splits[static_cast<size_t>(e / L)] += plan.routed_per_expert[static_cast<size_t>(e)];

  Tensor received = all_to_all_v(nn::dispatch_tokens(x, plan), group_, in_splits, got.rows_from);
  Counts kept;
  int64_t dropped = 0;
  const std::optional<int64_t> capacity = moe.capacity(got.total_tokens);
  const Counts keep = keep_order(got, L, k, capacity, kept, dropped);
  Tensor back = run_held_experts(moe, received, keep, kept);
  Tensor returned = all_to_all_v(back, group_, got.rows_from, in_splits);

  stats.tokens_per_expert = plan.routed_per_expert;
  stats.kept_per_expert.assign(static_cast<size_t>(E), 0);
  for (int64_t j = 0; j < L; ++j)
    stats.kept_per_expert[static_cast<size_t>(moe.first_local_expert() + j)] = kept[static_cast<size_t>(j)];
  stats.capacity = capacity;
  stats.dropped = dropped;
  traffic_ = {.sent_rows = plan.token_index.numel(), .received_rows = received.size(0)};
  return nn::combine_tokens(returned, routing.gates, plan);
}

nn::MoEConfig expert_parallel_config(nn::MoEConfig config, const dist::ProcessGroup& group) {
  config.expert_parallel_degree = group.size();
  config.expert_parallel_rank = group.rank();
  nn::check_moe_config(config, group.size());
  return config;
}

int64_t enable_expert_parallel(nn::Module& model, dist::ProcessGroup& group) {
  int64_t count = 0;
  for (nn::Module* m : model.modules()) {
    auto* moe = dynamic_cast<nn::MoE*>(m);
    if (moe == nullptr) continue;
    STRATA_CHECK(moe->config().expert_parallel_degree == group.size(), "enable_expert_parallel: an MoE built for ",
                 moe->config().expert_parallel_degree, " expert-parallel ranks on group '", group.name(), "' of size ",
                 group.size(), " (build its config with expert_parallel_config)");
    moe->set_expert_dispatcher(std::make_shared<ExpertParallel>(group));
    ++count;
  }
  return count;
}

bool is_expert_parameter(const std::string& name) {
  return name.rfind("experts.", 0) == 0 || name.find(".experts.") != std::string::npos;
}

namespace {

// Sums the gradients of `params` over `group` times `scale`; those without a gradient on any
// rank keep none, those with one somewhere get zeros where missing (one flag all_reduce).
void reduce_gradients(std::vector<Tensor>& params, dist::ProcessGroup& group, double scale) {
  if (params.empty()) return;
  std::vector<double> has(params.size());
  for (size_t p = 0; p < params.size(); ++p) has[p] = params[p].grad().defined() ? 1.0 : 0.0;
  Tensor flags = from_vector(has, {static_cast<int64_t>(has.size())}, {.dtype = DType::Float64});
  flags = flags.to(group.tensor_device());  // an NCCL group takes only its GPU's tensors
  if (group.size() > 1) group.all_reduce(flags)->wait();
  const std::vector<double> anywhere = flags.to_vector<double>();
  for (size_t p = 0; p < params.size(); ++p) {
    if (anywhere[p] == 0.0) continue;
    Tensor g = params[p].grad();
    if (!g.defined()) g = zeros(params[p].shape(), {.dtype = params[p].dtype(), .device = params[p].device()});
    g = g.contiguous().clone();
    if (group.size() > 1) group.all_reduce(g)->wait();
    params[p].set_grad(mul(g, scale));
  }
}

}  // namespace

void reduce_expert_parallel_gradients(nn::Module& model, dist::ProcessGroup& data_group,
                                      dist::ProcessGroup& expert_data_group) {
  std::vector<Tensor> dense, experts;
  for (auto& [name, p] : model.named_parameters()) (is_expert_parameter(name) ? experts : dense).push_back(p);
  const double scale = 1.0 / static_cast<double>(data_group.size());
  reduce_gradients(dense, data_group, scale);
  reduce_gradients(experts, expert_data_group, scale);
}

int64_t expert_training_bytes(const nn::MoEConfig& config, int64_t experts_per_rank, int64_t dtype_bytes) {
  const int64_t per_expert = 3 * config.hidden_size * config.intermediate_size;  // w1, w2, w3
  return 4 * experts_per_rank * per_expert * dtype_bytes;
}

void check_expert_memory(const nn::MoEConfig& config, int64_t ep, int64_t dtype_bytes, int64_t budget_bytes,
                         int64_t layers) {
  nn::check_moe_config(config, ep);
  const int64_t per_rank = config.num_experts / ep,
                need = layers * expert_training_bytes(config, per_rank, dtype_bytes);
  STRATA_CHECK(need <= budget_bytes, "expert parallelism: ", per_rank, " experts per rank (num_experts ",
               config.num_experts, " / ep ", ep, ")",
               layers > 1 ? " in each of " + std::to_string(layers) + " layers" : "", " need about ", need,
               " bytes (parameters, gradients and AdamW's two moments: 4 x 3 x hidden ", config.hidden_size,
               " x intermediate ", config.intermediate_size, " x ", dtype_bytes, " bytes each), over the budget of ",
               budget_bytes, " bytes: raise ep or lower the experts");
}

}  // namespace strata::parallel
