#pragma once
// Global-batch load balancing for nn::MoE under data, context and expert parallelism. The
// load-balancing loss E * sum_e f_e * P_e of one rank uses f_e (the fraction of routed slots
// that went to expert e: counts, no gradient) over the ranks' whole batch and P_e (the mean
// router probability) over the rank's own tokens. With n tokens on each of the W ranks and
// the gradients averaged over them, the average of the ranks' gradients is then one
// process's on the W * n tokens, and so is the mean of their losses; per-rank f_e (the
// default) gives a different loss whenever the ranks route differently.
//
// Cost: one all_reduce of E + 1 int64 counts per MoE layer per forward, over the group the
// gradients are averaged over.
#include <cstdint>

#include "strata/distributed/process_group.h"
#include "strata/nn/module.h"

namespace strata::parallel {

// Sets a routing-count reducer (nn::MoE::set_routing_count_reducer) summing over `group` on
// every nn::MoE inside `model`; returns how many. `group`: the ranks whose gradients are
// averaged - a mesh's MeshDim::DataContext (data x context; it holds the expert-parallel
// ranks too), a trainer's replicas group. Composes with ExpertParallel (set either first).
// Every rank of `group` must then run each MoE forward in the same order, with grad mode on
// or off (evaluation and sampling included), and `group` must outlive the model's forwards.
int64_t enable_global_load_balancing(nn::Module& model, dist::ProcessGroup& group);

}  // namespace strata::parallel
