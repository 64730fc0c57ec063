#pragma once
// What the multi-rank benchmarks share: a figure taken as the slowest (largest) rank's.
#include "strata/distributed/process_group.h"
#include "strata/tensor/factory.h"

namespace strata::bench {

// The largest x over `group` (every rank gets it; x itself with one rank).
inline double max_over_ranks(double x, dist::ProcessGroup& group) {
  Tensor t = full({1}, x, {.dtype = DType::Float64});
  if (group.size() > 1) group.all_reduce(t, dist::ReduceOp::Max)->wait();
  return t.item();
}

}  // namespace strata::bench
