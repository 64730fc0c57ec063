#pragma once
// Expert parallelism beside data parallelism (DDPOptions::experts, ZeroOptions::experts): the
// data-parallel group is then a mesh's MeshDim::DataContext, whose ranks hold different
// experts (parallel/expert_parallel.h). The parameters for which is_expert holds are the same
// only on the ranks of `data` (MeshDim::ExpertData, inside the data-parallel group): they get
// their own buckets, reduced over `data`, the others over the data-parallel group. An
// owner's expert gradient already sums its ep peers' tokens, so each is scaled by
// data.size() / (data-parallel group size) as it arrives: after the reduction it is one
// process's average over the data-parallel group.
#include <functional>
#include <string>

#include "strata/distributed/process_group.h"

namespace strata::parallel {

struct ExpertDataGroup {
  dist::ProcessGroup* data = nullptr;                           // null: no expert parallelism
  std::function<bool(const std::string& name)> is_expert = {};  // unset: is_expert_parameter
};

}  // namespace strata::parallel
