#pragma once
// What DistributedDataParallel and ZeroOptimizer do alike at construction (both collective
// over the group): check that every rank holds the same parameters, then give every rank
// rank 0's values.
#include <string>
#include <string_view>
#include <vector>

#include "strata/distributed/process_group.h"
#include "strata/nn/module.h"

namespace strata::detail {

// "'h.0.attn.c_attn.weight' [8, 24] float32": what the ranks compare, and what the error shows.
std::string describe_parameter(const std::string& name, const Tensor& t);

// Every rank must hold the same parameter list (`descriptions`, from describe_parameter, in
// order). The ranks compare one hash; on a mismatch they gather per-parameter hashes and
// then every rank's description of the first differing parameter, and every rank throws
// the same message, prefixed with `owner` ("DistributedDataParallel"). No-op on one rank.
void check_same_parameters(dist::ProcessGroup& group, const std::vector<std::string>& descriptions,
                           std::string_view owner);

// Broadcasts rank 0's `tensors`, then the module's buffers (which must be contiguous; none
// when `module` is null), one broadcast each, all in flight before the first wait.
void broadcast_from_rank0(dist::ProcessGroup& group, std::vector<Tensor> tensors, nn::Module* module,
                          std::string_view owner);

}  // namespace strata::detail
