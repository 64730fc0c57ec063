#include "distributed/group_checks.h"

#include <algorithm>
#include <sstream>

#include "strata/core/error.h"
#include "strata/core/hash.h"

namespace strata::dist::detail {

// --- arguments ---

void check_average_dtype(const char* op, ReduceOp reduce, DType dtype) {
  STRATA_CHECK(dtype != DType::Bool, op, ": bool tensors cannot be reduced (sums would leave 0/1; convert with .to())");
  STRATA_CHECK(reduce != ReduceOp::Avg || is_floating(dtype), op, ": ReduceOp::Avg needs a floating dtype, got ", dtype,
               " (integer averages would truncate; reduce with Sum and divide yourself)");
}

void check_same_dtype(const char* op, const Tensor& out, const Tensor& in) {
  STRATA_CHECK(out.dtype() == in.dtype(), op, ": out is ", out.dtype(), " but in is ", in.dtype());
}

void check_peer(const char* op, const char* role, int rank, const ProcessGroup& group) {
  STRATA_CHECK(rank >= 0 && rank < group.size(), op, ": ", role, " ", rank, " is out of range for group '",
               group.name(), "' of size ", group.size());
}

void check_chunk(const char* op, const char* what, int64_t numel, int64_t total, const ProcessGroup& group) {
  const int64_t mine = group.chunk_size(total, group.rank());
  STRATA_CHECK(numel == mine, op, ": ", what, " has ", numel, " elements but rank ", group.rank(), "'s chunk of ",
               total, " over ", group.size(), " ranks has ", mine,
               " (chunk r = [r*c, min((r+1)*c, M)), c = ceil(M/N))");
}

void check_all_to_all(const Tensor& out, const Tensor& in, int size) {
  check_same_dtype("all_to_all", out, in);
  const int64_t n = in.numel();
  STRATA_CHECK(out.numel() == n, "all_to_all: out has ", out.numel(), " elements but in has ", n);
  STRATA_CHECK(n % size == 0, "all_to_all: ", n, " elements do not split into ", size, " equal blocks");
}

namespace {

// One side's splits: a split per rank, none negative, summing to the tensor's rows.
void check_splits(const ProcessGroup& group, const char* splits_name, std::span<const int64_t> splits,
                  const char* tensor_name, const Tensor& t) {
  const auto n = static_cast<size_t>(group.size());
  STRATA_CHECK(splits.size() == n, "all_to_all_v on group '", group.name(), "' (rank ", group.rank(),
               "): ", splits_name, " has ", splits.size(), " entries but the group has ", n,
               " ranks (one split per rank)");
  int64_t sum = 0;
  for (size_t r = 0; r < n; ++r) {
    STRATA_CHECK(splits[r] >= 0, "all_to_all_v on group '", group.name(), "' (rank ", group.rank(), "): ", splits_name,
                 "[", r, "] is ", splits[r], "; a split counts rows and cannot be negative");
    sum += splits[r];
  }
  STRATA_CHECK(sum == t.size(0), "all_to_all_v on group '", group.name(), "' (rank ", group.rank(), "): ", splits_name,
               " sum to ", sum, " rows but ", tensor_name, " of shape ", t.shape(), " has ", t.size(0),
               " rows along dim 0");
}

}  // namespace

int64_t check_all_to_all_v(const ProcessGroup& group, const Tensor& out, const Tensor& in,
                           std::span<const int64_t> out_splits, std::span<const int64_t> in_splits) {
  STRATA_CHECK(out.dtype() == in.dtype(), "all_to_all_v on group '", group.name(), "' (rank ", group.rank(),
               "): out is ", out.dtype(), " but in is ", in.dtype());
  STRATA_CHECK(in.dim() >= 1 && out.dim() >= 1, "all_to_all_v on group '", group.name(), "' (rank ", group.rank(),
               "): out of shape ", out.shape(), " and in of shape ", in.shape(),
               " need a dim 0 of rows (give a scalar the shape [1])");
  const Shape& os = out.shape();
  const Shape& is = in.shape();
  STRATA_CHECK(os.size() == is.size() && std::equal(os.begin() + 1, os.end(), is.begin() + 1),
               "all_to_all_v on group '", group.name(), "' (rank ", group.rank(), "): out of shape ", os,
               " and in of shape ", is, " have different rows (the dims after the first must match)");
  check_splits(group, "in_splits", in_splits, "in", in);
  check_splits(group, "out_splits", out_splits, "out", out);
  // The one pair of splits a rank can check alone: the rows it sends itself.
  const auto me = static_cast<size_t>(group.rank());
  STRATA_CHECK(in_splits[me] == out_splits[me], "all_to_all_v on group '", group.name(), "' (rank ", group.rank(),
               "): in_splits[", me, "] = ", in_splits[me], " rows to itself but out_splits[", me,
               "] = ", out_splits[me], " rows from itself");
  int64_t row = 1;
  for (size_t d = 1; d < is.size(); ++d) row *= is[d];
  return row;
}

// --- descriptions ---

std::string describe(DType dtype, int64_t numel, std::string_view extra) {
  std::string s;
  if (!extra.empty()) s.append(extra).append(", ");
  s.append(dtype_name(dtype)).append(", ").append(std::to_string(numel)).append(" elements");
  return s;
}

bool overlap(const Tensor& a, const Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0) return false;
  auto* pa = static_cast<const char*>(a.data_ptr());
  auto* pb = static_cast<const char*>(b.data_ptr());
  return pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

// --- split ---

SplitPlan plan_split(const ProcessGroup& group, std::span<const int> ranks, const std::string& name) {
  std::ostringstream list;
  for (size_t i = 0; i < ranks.size(); ++i) list << (i ? "," : "") << ranks[i];
  STRATA_CHECK(!ranks.empty(), "split of group '", group.name(), "': the rank list is empty");
  SplitPlan plan;
  for (size_t i = 0; i < ranks.size(); ++i) {
    STRATA_CHECK(ranks[i] >= 0 && ranks[i] < group.size(), "split of group '", group.name(), "': rank ", ranks[i],
                 " in {", list.str(), "} is out of range for size ", group.size());
    STRATA_CHECK(i == 0 || ranks[i] > ranks[i - 1], "split of group '", group.name(), "': ranks {", list.str(),
                 "} must be ascending and distinct");
    if (ranks[i] == group.rank()) plan.my_index = static_cast<int>(i);
  }
  STRATA_CHECK(plan.my_index >= 0, "split of group '", group.name(), "': rank ", group.rank(),
               " must be in its own list {", list.str(), "}");
  plan.ranks = ranks;
  plan.name = name.empty() ? "split(ranks " + list.str() + ")" : name;
  for (int r : ranks) plan.globals.push_back(group.global_ranks()[static_cast<size_t>(r)]);
  return plan;
}

SplitEntry split_entry(std::span<const int> ranks) {
  return {ranks.front(), static_cast<int64_t>(ranks.size()), fnv1a_words(ranks)};
}

void check_partition(std::string_view group, std::span<const SplitEntry> all) {
  for (size_t r = 0; r < all.size(); ++r) {
    const SplitEntry& a = all[r];
    const SplitEntry& lead = all[static_cast<size_t>(a.lowest)];
    const int64_t members =
        std::count_if(all.begin(), all.end(), [&](const SplitEntry& x) { return x.lowest == a.lowest; });
    STRATA_CHECK(lead.lowest == a.lowest && lead.hash == a.hash, "split of group '", group,
                 "': the rank lists do not form a partition: rank ", r, " lists ", a.count, " ranks starting at rank ",
                 a.lowest, " but rank ", a.lowest, " lists a different set (", lead.count, " ranks starting at ",
                 lead.lowest, "); every member must pass the same list");
    STRATA_CHECK(members == a.count, "split of group '", group, "': the rank lists do not form a partition: rank ", r,
                 " lists ", a.count, " ranks starting at rank ", a.lowest, " but ", members,
                 " ranks passed a list starting there; every member must pass the same list");
  }
}

// --- debug signatures ---

Signature op_signature(OpType op, DType dtype, int64_t numel) {
  return {.kind = static_cast<int32_t>(op), .dtype = static_cast<int32_t>(dtype), .numel = numel};
}

Signature reduce_signature(OpType op, ReduceOp reduce, DType dtype, int64_t numel) {
  Signature s = op_signature(op, dtype, numel);
  s.reduce = static_cast<int32_t>(reduce);
  return s;
}

Signature broadcast_signature(DType dtype, int64_t numel, int root) {
  Signature s = op_signature(OpType::Broadcast, dtype, numel);
  s.root = root;
  return s;
}

Signature all_to_all_v_signature(DType dtype, int64_t row_numel) {
  return op_signature(OpType::AllToAllV, dtype, row_numel);
}

Signature barrier_signature() { return {.kind = static_cast<int32_t>(OpType::Barrier)}; }
Signature split_signature() { return {.kind = kSplitKind}; }

std::string signature_string(const Signature& s) {
  std::ostringstream os;
  os << (s.kind == kSplitKind ? std::string_view("split") : op_type_name(static_cast<OpType>(s.kind))) << "(";
  if (s.reduce >= 0) os << reduce_op_name(static_cast<ReduceOp>(s.reduce)) << ", ";
  if (s.dtype >= 0) os << static_cast<DType>(s.dtype) << ", " << s.numel << " elements";
  if (s.kind == static_cast<int32_t>(OpType::AllToAllV)) os << " per row";
  if (s.root >= 0) os << ", root " << s.root;
  os << ") as op #" << s.seq;
  return os.str();
}

std::string signature_mismatch(std::span<const Signature> all, std::string_view group) {
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] == all[0]) continue;
    std::ostringstream os;
    os << "collective mismatch (STRATA_DEBUG_COLLECTIVES): ranks 0 and " << r << " of group '" << group
       << "' issued different ops: rank 0: " << signature_string(all[0]) << "; rank " << r << ": "
       << signature_string(all[r]);
    return os.str();
  }
  return {};
}

}  // namespace strata::dist::detail

namespace strata::dist {

std::vector<int64_t> OpSignature::words() const { return {kind, reduce, dtype, root, numel, seq}; }

OpSignature OpSignature::from_words(const int64_t* w) {
  return {static_cast<int32_t>(w[0]),
          static_cast<int32_t>(w[1]),
          static_cast<int32_t>(w[2]),
          static_cast<int32_t>(w[3]),
          w[4],
          w[5]};
}

}  // namespace strata::dist
