// src/distributed/group_checks.h: the checks and descriptions both process-group backends
// use (the MPI and NCCL collectives run them on gathered data; here they run on plain data).
#include <gtest/gtest.h>

#include <vector>

#include "distributed/group_checks.h"
#include "strata/tensor/factory.h"

namespace strata::dist::detail {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Ranks 0-3 split into {0, 1} and {2, 3}: every rank's entry, by rank.
std::vector<SplitEntry> entries(const std::vector<std::vector<int>>& list_of_rank) {
  std::vector<SplitEntry> out;
  for (const auto& list : list_of_rank) out.push_back(split_entry(list));
  return out;
}

TEST(GroupChecks, PartitionAccepted) {
  EXPECT_EQ(error_of([] { check_partition("world", entries({{0, 1}, {0, 1}, {2, 3}, {2, 3}})); }), "");
  EXPECT_EQ(error_of([] { check_partition("world", entries({{0}, {1}, {2}})); }), "");
}

TEST(GroupChecks, PartitionRefusedWhenListsDisagree) {
  // Rank 1 names {0, 1, 2}, rank 0 names {0, 1}.
  std::string err = error_of([] { check_partition("world", entries({{0, 1}, {0, 1, 2}, {2}})); });
  EXPECT_NE(err.find("split of group 'world': the rank lists do not form a partition: rank 1"), std::string::npos)
      << err;
  // Rank 2 names {1, 2} but rank 1, the list's lowest rank, names {1}: two ranks start there.
  err = error_of([] { check_partition("g", entries({{0}, {1}, {1, 2}, {3}})); });
  EXPECT_NE(err.find("rank 1 lists 1 ranks starting at rank 1 but 2 ranks passed a list starting there"),
            std::string::npos)
      << err;
  // Same lengths, different members: the hash tells them apart.
  err = error_of([] { check_partition("g", entries({{0, 1}, {0, 2}, {2}})); });
  EXPECT_NE(err.find("rank 1 lists 2 ranks starting at rank 0 but rank 0 lists a different set"), std::string::npos)
      << err;
  // Two ranks claim a list of three starting at 0, which only they name.
  err = error_of([] { check_partition("g", entries({{0, 1, 2}, {0, 1, 2}, {2}})); });
  EXPECT_NE(err.find("but 2 ranks passed a list starting there"), std::string::npos) << err;
}

TEST(GroupChecks, SignaturesRoundTripAsWords) {
  const Signature s = broadcast_signature(DType::Float64, 12, 3);
  const std::vector<int64_t> w = s.words();
  ASSERT_EQ(w.size(), Signature::kWords);
  EXPECT_EQ(Signature::from_words(w.data()), s);
}

TEST(GroupChecks, SignatureMismatchNamesBothOps) {
  Signature a = reduce_signature(OpType::AllReduce, ReduceOp::Sum, DType::Float32, 4);
  Signature b = op_signature(OpType::AllGather, DType::Float32, 4);
  EXPECT_EQ(signature_mismatch(std::vector<Signature>{a, a, a}, "world"), "");
  b.seq = 7;
  a.seq = 7;
  const std::string msg = signature_mismatch(std::vector<Signature>{a, a, b}, "world");
  EXPECT_EQ(msg,
            "collective mismatch (STRATA_DEBUG_COLLECTIVES): ranks 0 and 2 of group 'world' issued different ops: "
            "rank 0: all_reduce(sum, float32, 4 elements) as op #7; rank 2: all_gather(float32, 4 elements) as op #7");
  EXPECT_EQ(signature_string(split_signature()), "split() as op #0");
  EXPECT_EQ(signature_string(barrier_signature()), "barrier() as op #0");
}

TEST(GroupChecks, DescribeAndOverlap) {
  EXPECT_EQ(describe(DType::Float32, 12, "sum"), "sum, float32, 12 elements");
  EXPECT_EQ(describe(DType::Int64, 0), "int64, 0 elements");
  Tensor t = zeros({8});
  EXPECT_TRUE(overlap(t.narrow(0, 0, 4), t.narrow(0, 3, 2)));
  EXPECT_FALSE(overlap(t.narrow(0, 0, 4), t.narrow(0, 4, 4)));
  EXPECT_FALSE(overlap(t.narrow(0, 0, 0), t));
}

TEST(GroupChecks, ArgumentChecksNameTheOp) {
  std::string err = error_of([] { check_average_dtype("reduce_scatter", ReduceOp::Avg, DType::Int32); });
  EXPECT_NE(err.find("reduce_scatter: ReduceOp::Avg needs a floating dtype, got int32"), std::string::npos) << err;
  EXPECT_EQ(error_of([] { check_average_dtype("all_reduce", ReduceOp::Sum, DType::Int32); }), "");
  err = error_of([] { check_all_to_all(zeros({6}), zeros({6}), 4); });
  EXPECT_NE(err.find("all_to_all: 6 elements do not split into 4 equal blocks"), std::string::npos) << err;
  err = error_of([] { check_same_dtype("all_gather", zeros({2}), zeros({2}, {.dtype = DType::Float64})); });
  EXPECT_NE(err.find("all_gather: out is float32 but in is float64"), std::string::npos) << err;
}

}  // namespace
}  // namespace strata::dist::detail
