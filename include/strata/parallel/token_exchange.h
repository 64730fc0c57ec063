#pragma once
// Expert parallelism's token exchange as a differentiable op: MoE dispatch sends each token
// (a row) to the rank that holds its expert, combine sends the expert outputs back. Both are
// one all_to_all_v whose backward is the same exchange with the splits swapped (the rows a
// rank sent come back to it as their gradients). Every rank of the group calls it in the same
// order, forward and backward.
#include <cstdint>
#include <span>
#include <vector>

#include "strata/distributed/process_group.h"
#include "strata/tensor/tensor.h"

namespace strata::parallel {

// Forward: the first in_splits[0] rows of x (dim 0) go to group rank 0, the next in_splits[1]
// to rank 1, ...; the result holds out_splits[i] rows from each rank i, in rank order, with
// x's row shape and dtype. out_splits[i] must be rank i's in_splits[this rank]
// (dist::exchange_split_sizes). Backward: the gradient's rows go back, out_splits and
// in_splits swapped. x need not be contiguous.
Tensor all_to_all_v(const Tensor& x, dist::ProcessGroup& group, std::span<const int64_t> in_splits,
                    std::span<const int64_t> out_splits);

// The same after exchanging the split sizes (one all_to_all of the counts); `out_splits`,
// when given, receives them (the combine step sends the rows back with the splits swapped).
Tensor all_to_all_v(const Tensor& x, dist::ProcessGroup& group, std::span<const int64_t> in_splits,
                    std::vector<int64_t>* out_splits = nullptr);

// The exchange itself, without autograd (the result never requires grad).
Tensor all_to_all_v_rows(const Tensor& x, dist::ProcessGroup& group, std::span<const int64_t> in_splits,
                         std::span<const int64_t> out_splits);

// What the exchanges on this thread have done since the last reset (forward and backward):
// for benchmarks (the all-to-all share of a step) and tests.
struct TokenExchangeStats {
  int64_t calls = 0;
  int64_t bytes_sent = 0;      // x's bytes, this rank's own rows included (as the group counts them)
  int64_t bytes_received = 0;  // the result's bytes
  double seconds = 0;          // wall time in the collective, waiting included
};
TokenExchangeStats token_exchange_stats();
void reset_token_exchange_stats();

}  // namespace strata::parallel
