#pragma once
// The checks and descriptions behind ProcessGroup's front door (process_group.cpp) and what
// the backends (MPI, NCCL) share: argument checks with one wording, the split rank-list and
// partition checks, the debug-collective signatures, op descriptions. Each backend keeps
// only how it moves the data (and how it gathers what is checked here).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/distributed/process_group.h"

namespace strata::dist::detail {

// --- arguments (each throws strata::Error naming the op) ---

// ReduceOp::Avg on an integer dtype would truncate; bool is never reduced.
void check_average_dtype(const char* op, ReduceOp reduce, DType dtype);
// "all_gather: out is float32 but in is float64".
void check_same_dtype(const char* op, const Tensor& out, const Tensor& in);
// `rank` is a rank of the group: `role` is "root", "destination rank" or "source rank".
void check_peer(const char* op, const char* role, int rank, const ProcessGroup& group);
// `what` (all_gather's in, reduce_scatter's out) has `numel` elements, this rank's chunk of `total`.
void check_chunk(const char* op, const char* what, int64_t numel, int64_t total, const ProcessGroup& group);
// all_to_all: same dtype and size, divisible into one block per rank.
void check_all_to_all(const Tensor& out, const Tensor& in, int size);
// all_to_all_v: same dtype and row shape (dims after the first), one non-negative split per
// rank of the group, each side's splits summing to its rows. Returns the elements per row.
int64_t check_all_to_all_v(const ProcessGroup& group, const Tensor& out, const Tensor& in,
                           std::span<const int64_t> out_splits, std::span<const int64_t> in_splits);

// --- descriptions ---

// "sum, float32, 12 elements" (built for every op: plain concatenation).
std::string describe(DType dtype, int64_t numel, std::string_view extra = {});
// Whether the two tensors' bytes overlap (any device; empty tensors never do).
bool overlap(const Tensor& a, const Tensor& b);

// --- split ---

// Checks the rank list that this rank passed to group.split(ranks, name): non-empty, in
// range, ascending, distinct and containing this rank. The plan views `ranks`.
SplitPlan plan_split(const ProcessGroup& group, std::span<const int> ranks, const std::string& name);

// What each rank contributes to the partition check (gathered from every rank of the group).
struct SplitEntry {
  int64_t lowest = 0;  // the first rank of its list
  int64_t count = 0;   // the length of its list
  uint64_t hash = 0;   // of the whole list
};
SplitEntry split_entry(std::span<const int> ranks);
// Throws unless the lists behind `all` (one entry per group rank) partition the group: every
// rank must pass the same list as the lowest rank it names, and every member of that list
// must name it. Every rank checks the same gathered data, so every rank fails alike.
void check_partition(std::string_view group, std::span<const SplitEntry> all);

// --- debug signatures (STRATA_DEBUG_COLLECTIVES=1) ---

inline constexpr int32_t kSplitKind = 100;  // a split, beside the OpType values

// One rank's view of the op it is about to run (process_group.h).
using Signature = OpSignature;
Signature op_signature(OpType op, DType dtype, int64_t numel);
Signature reduce_signature(OpType op, ReduceOp reduce, DType dtype, int64_t numel);
Signature broadcast_signature(DType dtype, int64_t numel, int root);
Signature barrier_signature();
// all_to_all_v: the splits differ per rank, the dtype and the elements per row may not.
Signature all_to_all_v_signature(DType dtype, int64_t row_numel);
Signature split_signature();

// "all_reduce(sum, float32, 4 elements) as op #3".
std::string signature_string(const Signature& s);
// Empty when every rank issued the same op as rank 0; otherwise the message naming the
// first rank that did not. The caller throws it (every rank sees the same data).
std::string signature_mismatch(std::span<const Signature> all, std::string_view group);

}  // namespace strata::dist::detail
