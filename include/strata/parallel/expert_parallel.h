#pragma once
// Expert parallelism for nn::MoE: the E experts are sharded over an ep group (rank p holds
// experts [p * E / ep, (p + 1) * E / ep), each under its global name), and each forward
//   1. exchanges, per destination, the routed counts per (held expert, choice rank) and the
//      sender's token count (one all_to_all_v of int64);
//   2. dispatches every routed slot to its expert's rank (one all_to_all_v of the rows);
//   3. on the owner, decides the kept slots and runs each held expert once on its rows;
//   4. sends the outputs back (one all_to_all_v; dropped slots come back as zeros) and sums
//      them weighted by the gates at their tokens.
// Dropping equals one process over the concatenated batch of the ep group (group rank order
// = batch order, as when each data rank takes a contiguous slice): the capacity is
// expert_capacity of the group's total tokens, and each expert keeps its slots in the order
// (choice rank, source rank, token) - nn::plan_dispatch's (choice rank, token) over that
// batch. stats() then holds, on each rank: tokens_per_expert its own tokens' routing (the
// load-balancing loss is per rank, as under data parallelism, unless
// enable_global_load_balancing (moe_load_balance.h) sums the counts), kept_per_expert and dropped
// for the experts it holds over the whole group's tokens (their sums over the group are the
// one-process values).
//
// Gradients: an expert's gradient on its owner already sums the contributions of every ep
// rank's tokens; reduce_expert_parallel_gradients sums it over the expert-data group and
// averages everything else over the data group, so that the result equals one process on
// the global batch when every rank's loss is the mean over an equal share of it.
#include <cstdint>
#include <string>
#include <vector>

#include "strata/distributed/process_group.h"
#include "strata/nn/module.h"
#include "strata/nn/moe.h"

namespace strata::parallel {

class ExpertParallel : public nn::ExpertDispatcher {
 public:
  // `group`: the ep group (DeviceMesh's MeshDim::Expert); every rank of it calls forward and
  // backward in the same order.
  explicit ExpertParallel(dist::ProcessGroup& group) : group_(group) {}
  Tensor dispatch(nn::MoE& moe, const Tensor& x, const nn::MoERouting& routing, nn::MoEStats& stats) override;

  // The last forward's rows. Its all_to_all_v bytes sent: (L * k + 1) * 8 * ep for the
  // counts, then (sent_rows + received_rows) * C * element size for dispatch and combine;
  // received: the same with the two row counts swapped in, i.e. equal totals.
  struct Traffic {
    int64_t sent_rows = 0;      // slots this rank dispatched (= rows it got back)
    int64_t received_rows = 0;  // slots it received for its experts (= rows it sent back)
  };
  const Traffic& last_traffic() const { return traffic_; }

 private:
  dist::ProcessGroup& group_;
  Traffic traffic_;
};

// Makes `moe` hold its rank's share of the experts: returns a config with
// expert_parallel_degree = group.size() and expert_parallel_rank = group.rank(), checked
// (the degree must divide num_experts, top_k at most num_experts) before any collective.
nn::MoEConfig expert_parallel_config(nn::MoEConfig config, const dist::ProcessGroup& group);

// Sets an ExpertParallel over `group` on every nn::MoE inside `model` (their configs must
// have been built with expert_parallel_config for that group); returns how many.
int64_t enable_expert_parallel(nn::Module& model, dist::ProcessGroup& group);

// A parameter of an expert: a name holding the component "experts".
bool is_expert_parameter(const std::string& name);

// After backward: averages the non-expert gradients over `data_group` (MeshDim::DataContext)
// and sums the expert gradients over `expert_data_group` (MeshDim::ExpertData) divided by
// data_group.size(). A parameter without a gradient on every rank of its group stays without
// one (an expert idle on the whole global batch: the optimizer skips it, as in one process);
// one with a gradient somewhere gets zeros where it had none.
void reduce_expert_parallel_gradients(nn::Module& model, dist::ProcessGroup& data_group,
                                      dist::ProcessGroup& expert_data_group);

// Bytes one rank's experts take in training (parameters, their gradients and AdamW's two
// moments: 4 copies) at `dtype_bytes` per element; expert_parallel_config's memory check
// compares it with a budget.
int64_t expert_training_bytes(const nn::MoEConfig& config, int64_t experts_per_rank, int64_t dtype_bytes);

// Throws, naming the experts per rank, the estimate and the budget, when one rank's experts
// of `layers` such MoE layers would take more than `budget_bytes` (call before training,
// before any collective).
void check_expert_memory(const nn::MoEConfig& config, int64_t expert_parallel_degree, int64_t dtype_bytes,
                         int64_t budget_bytes, int64_t layers = 1);

}  // namespace strata::parallel
