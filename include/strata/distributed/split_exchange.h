#pragma once
// What a token dispatcher needs before ProcessGroup::all_to_all_v: each rank knows how many
// rows it sends to every rank (its routing counts) but not how many it will receive. Splits
// that disagree across ranks are not checked by all_to_all_v itself: MPI fails the op on a
// rank sent more rows than it expects, and NCCL's result is undefined.
#include <cstdint>
#include <span>
#include <vector>

#include "strata/distributed/process_group.h"

namespace strata::dist {

// Collective, blocking: every rank passes its in_splits (rows it sends to each group rank)
// and gets its out_splits (rows each group rank sends it), by one all_to_all of the int64
// counts (counted in stats() as an all_to_all of 8 bytes per rank). Checks the splits (one
// per rank, none negative) before any communication, naming the group and the entry.
std::vector<int64_t> exchange_split_sizes(ProcessGroup& group, std::span<const int64_t> in_splits);

}  // namespace strata::dist
