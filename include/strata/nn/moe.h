#pragma once
// A mixture-of-experts feed-forward layer, Mixtral's sparse MoE block: a router (Linear C -> E
// without bias, named "gate") scores every token, each token goes to its top-k experts
// (SwiGLU MLPs "experts.<e>" with Mixtral's names w1 = gate, w3 = up, w2 = down), and their
// outputs are summed weighted by the gates. Optionally each expert takes at most `capacity`
// slots (the rest dropped and counted), and the router adds a load-balancing loss and a z-loss
// to the model's loss. The forward runs as separate steps (route, plan_dispatch,
// dispatch_tokens, run_experts, combine_tokens: moe_routing.h), so that expert parallelism or
// a grouped GEMM replaces one of them.
//
// An expert no token reached in a forward is not run: its parameters get no gradient, so the
// optimizer leaves them untouched that step (as PyTorch's MoE blocks, which loop over the
// experts hit). Under DistributedDataParallel pass find_unused_parameters = true (an expert
// idle on one rank is reduced as zero there, one idle on every rank keeps no gradient);
// ZeroOptimizer handles such parameters at every stage.
//
// Tensor parallelism (a LayerFactory of degree N): the router stays whole on every rank, so
// every rank of the group routes the same tokens alike; each expert's w1 and w3 are
// column-parallel (intermediate features split) and w2 row-parallel. run_experts sums the
// w2 partial outputs of all its experts in one reduce_partial, and the experts' input enters
// the region once (enter_region: its backward sums the input gradient), so the collectives
// a rank calls never depend on which experts were idle. With sequence parallelism every rank
// gathers the whole sequence and routes it, the experts' partial outputs are combined at
// their tokens and reduce-scattered back to the pieces, and the auxiliary loss, which every
// rank computes whole, back-propagates 1/n per rank (its paths are summed over the ranks).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "strata/nn/containers.h"
#include "strata/nn/layer_factory.h"
#include "strata/nn/layers.h"
#include "strata/nn/moe_routing.h"

namespace strata::nn {

enum class MoEGating {
  Softmax,  // softmax over the E logits, then the top k (Mixtral, Switch)
  Sigmoid,  // sigmoid of each logit, then the top k (DeepSeek-V3)
};

struct MoEConfig {
  int64_t hidden_size = 256;        // C
  int64_t intermediate_size = 688;  // each expert's SwiGLU width
  int64_t num_experts = 8;          // E
  int64_t top_k = 2;                // experts per token, in [1, E]
  MoEGating gating = MoEGating::Softmax;
  bool normalize_gates = true;                           // the k gates divided by their sum (Mixtral)
  std::optional<double> capacity_factor = std::nullopt;  // slots per expert = expert_capacity(..); unset: dropless
  double aux_loss_coef = 0.0;                            // weight of load_balancing_loss in auxiliary_loss()
  double z_loss_coef = 0.0;                              // weight of router_z_loss in auxiliary_loss()
  // Expert parallelism: this layer holds only experts [rank * E / degree, (rank + 1) * E /
  // degree), under their global names "experts.<e>" (checkpoints match by name at any degree).
  int64_t expert_parallel_degree = 1;
  int64_t expert_parallel_rank = 0;
  // The held experts' products run as grouped_linear (on CUDA one cuBLAS grouped GEMM each
  // for w1, w3 and w2, and for each gradient) wherever their layers allow (plain products, no
  // hooks); false: one expert after another. The values are the same on the CPU.
  bool grouped_experts = true;
};

// Checks a config, naming the field and the rule; `expert_parallel_degree` must divide
// num_experts (each rank of an ep group holds num_experts / degree experts).
void check_moe_config(const MoEConfig& config, int64_t expert_parallel_degree = 1);

// What the router decided for N tokens.
struct MoERouting {
  Tensor logits;   // [N, E]
  Tensor probs;    // [N, E], rows summing to 1 (softmax; sigmoid scores over their row sum)
  Tensor gates;    // [N, k], the chosen experts' weights, largest first
  Tensor experts;  // int64 [N, k], the chosen experts
};

// The last forward's statistics. tokens_per_expert is always this rank's own routing; the
// balance_* counts are what the load-balancing loss divided (f_e): the same as
// tokens_per_expert and this forward's tokens, or their sums over the ranks of a routing-count
// reducer when the MoE has one (global-batch balancing).
struct MoEStats {
  std::vector<int64_t> tokens_per_expert;          // slots routed to each expert (before capacity)
  std::vector<int64_t> kept_per_expert;            // slots each expert computed
  std::optional<int64_t> capacity = std::nullopt;  // unset: dropless
  int64_t dropped = 0;                             // slots over capacity
  Tensor load_balancing_loss;                      // [] unweighted; P_e always over this rank's tokens
  Tensor z_loss;                                   // [] unweighted (router_z_loss)
  std::vector<int64_t> balance_tokens_per_expert;  // f_e's numerators: routed slots per expert
  int64_t balance_tokens = 0;                      // f_e's tokens (times top_k: its denominator)
};

// Global-batch load balancing: sums one forward's routing counts over the ranks whose
// gradients are averaged (parallel::enable_global_load_balancing). Gets this rank's
// [slots routed to expert 0, .., expert E-1, tokens] and returns the sums over those ranks,
// the same length. Every rank of the group must run each MoE forward in the same order.
using RoutingCountReducer = std::function<std::vector<int64_t>(const std::vector<int64_t>& counts)>;

// One expert: w2(silu(w1(x)) * w3(x)), as LlamaMLP. With a tensor-parallel factory, w1 and
// w3 are its column() layers and w2 its row_partial(): forward then returns this rank's
// partial sums (MoE::run_experts adds them up).
class SwiGLUExpert : public Module {
 public:
  SwiGLUExpert(int64_t hidden_size, int64_t intermediate_size, const InitOptions& init,
               LayerFactory& factory = *default_layer_factory());
  Tensor forward(const Tensor& x);
  std::shared_ptr<Linear> w1, w2, w3;
};

class MoE;

// Replaces the steps between the router and the gate-weighted sum (expert parallelism:
// parallel::ExpertParallel). Gets the flat tokens x [N, C] and the routing; returns [N, C]
// and fills stats' tokens_per_expert, kept_per_expert, capacity and dropped (the MoE adds
// the two losses). nn does not depend on how the tokens travel.
class ExpertDispatcher {
 public:
  virtual ~ExpertDispatcher() = default;
  virtual Tensor dispatch(MoE& moe, const Tensor& x, const MoERouting& routing, MoEStats& stats) = 0;
};

class MoE : public Module {
 public:
  // `init` draws the router and the experts (nn::Llama's: normal(0, init_std) by name).
  // `factory` splits the experts (tensor parallelism, optionally sequence parallel: the
  // input is then [B, T / n, C]); it must outlive the layer. Null: the single-process layers.
  MoE(const MoEConfig& config, const InitOptions& init, LayerFactory* factory = nullptr);
  // x [.., C] -> [.., C]; records stats().
  Tensor forward(const Tensor& x);

  // The steps of forward, for callers that replace one (expert parallelism).
  MoERouting route(const Tensor& x) const;                // x [N, C]
  std::optional<int64_t> capacity(int64_t tokens) const;  // unset: dropless
  // [S, C] -> [S, C], rows grouped by held expert (one count per held expert, in order:
  // every expert when expert_parallel_degree is 1); experts with 0 rows are not run. Under
  // tensor parallelism: one all-reduce of the [S, C] output whenever S > 0 (S, like the
  // routing, is the same on every rank of the group); in a sequence-parallel forward the
  // partial sums are returned (forward reduce-scatters them after the gates weigh them).
  Tensor run_experts(const Tensor& grouped, const std::vector<int64_t>& rows_per_expert);
  // Whether run_experts runs grouped products now (MoEConfig::grouped_experts, and every held
  // expert's layers are plain local products without hooks and without bias).
  bool runs_grouped() const;
  // The held experts: [first_local_expert(), first_local_expert() + num_local_experts()).
  int64_t num_local_experts() const { return config_.num_experts / config_.expert_parallel_degree; }
  int64_t first_local_expert() const { return config_.expert_parallel_rank * num_local_experts(); }
  // Set: forward hands it the routed tokens (expert parallelism); null: all experts here.
  void set_expert_dispatcher(std::shared_ptr<ExpertDispatcher> dispatcher) { dispatcher_ = std::move(dispatcher); }
  // Set: every forward sums its routing counts through it before forming the load-balancing
  // loss (f_e over the global batch, P_e still over this rank's tokens: averaging the ranks'
  // gradients then gives one process's); empty: this rank's counts, as without one. Not
  // called while aux_loss_coef is 0 (no loss to form).
  void set_routing_count_reducer(RoutingCountReducer reducer) { count_reducer_ = std::move(reducer); }
  bool has_routing_count_reducer() const { return static_cast<bool>(count_reducer_); }

  // aux_loss_coef * load balancing + z_loss_coef * z-loss of the last forward ([], in
  // the graph); undefined when both coefficients are 0 or before any forward.
  Tensor auxiliary_loss() const;
  const MoEStats& stats() const { return stats_; }
  const MoEConfig& config() const { return config_; }

  std::shared_ptr<Linear> gate;          // the router, C -> E
  std::shared_ptr<ModuleDict> experts;   // SwiGLUExpert by global index, the held ones only
  SwiGLUExpert& expert(size_t e) const;  // global index e; checked (held here)

 private:
  // Fills stats_'s balance_* counts from tokens_per_expert and `tokens` (reduced when set).
  void balance_counts(int64_t tokens);
  // run_experts' two ways over rows of held experts (with rows): grouped_linear per layer, or
  // each expert's forward on its rows.
  Tensor run_grouped(const Tensor& grouped, const std::vector<int64_t>& rows);
  Tensor run_one_by_one(const Tensor& grouped, const std::vector<int64_t>& rows);

  MoEConfig config_;
  LayerFactory* factory_;        // never null (the default factory lives for the program)
  bool sequence_split_ = false;  // the last forward ran sequence parallel
  MoEStats stats_;
  std::shared_ptr<ExpertDispatcher> dispatcher_;
  RoutingCountReducer count_reducer_;
};

}  // namespace strata::nn
