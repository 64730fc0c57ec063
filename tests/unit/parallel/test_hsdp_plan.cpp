// HSDP's shard size against the nodes (plan_hybrid_shard_size), without MPI: the default is
// one node's ranks; sizes that do not divide the group or whose shard groups span nodes are
// refused with the value and the rule.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "strata/parallel/hsdp.h"
#include "test_util.h"

namespace strata {
namespace {

using parallel::plan_hybrid_shard_size;

const std::vector<std::string> kTwoByTwo = {"h0", "h0", "h1", "h1"};

TEST(HsdpPlan, DefaultIsTheRanksOfOneNode) {
  EXPECT_EQ(plan_hybrid_shard_size(kTwoByTwo, 0), 2);
  EXPECT_EQ(plan_hybrid_shard_size({"a", "a", "a", "b", "b", "b"}, 0), 3);
  EXPECT_EQ(plan_hybrid_shard_size({"a"}, 0), 1);
}

TEST(HsdpPlan, ExplicitSizesInsideANodeAreAccepted) {
  EXPECT_EQ(plan_hybrid_shard_size(kTwoByTwo, 1), 1);
  EXPECT_EQ(plan_hybrid_shard_size(kTwoByTwo, 2), 2);
  EXPECT_EQ(plan_hybrid_shard_size({"a", "a", "a", "a"}, 4), 4) << "one node: the whole group may shard";
}

TEST(HsdpPlan, ShardGroupSpanningNodesIsRefused) {
  strata::testing::expect_error_mentions([] { plan_hybrid_shard_size(kTwoByTwo, 4); },
                                         {"shard size 4 does not match the nodes", "data ranks 0-3", "h0: ranks 0,1",
                                          "h1: ranks 2,3", "must lie inside one node"});
  // Nodes whose ranks are not consecutive in the data group: {0,2} on h0, {1,3} on h1.
  strata::testing::expect_error_mentions(
      [] {
        plan_hybrid_shard_size({"h0", "h1", "h0", "h1"}, 2);
      },
      {"shard size 2 does not match the nodes", "data ranks 0-1", "h0: rank 0", "h1: rank 1"});
}

TEST(HsdpPlan, SizeThatDoesNotDivideTheGroupIsRefused) {
  strata::testing::expect_error_mentions([] { plan_hybrid_shard_size(kTwoByTwo, 3); },
                                         {"shard size 3 does not divide the data group's 4 ranks"});
  strata::testing::expect_error_mentions([] { plan_hybrid_shard_size(kTwoByTwo, -1); },
                                         {"shard size -1 must be positive"});
}

TEST(HsdpPlan, DefaultNeedsTheSameRanksOnEveryNode) {
  strata::testing::expect_error_mentions(
      [] {
        plan_hybrid_shard_size({"h0", "h0", "h0", "h1"}, 0);
      },
      {"every node must hold the same number", "h0: ranks 0,1,2", "h1: rank 3"});
  EXPECT_EQ(plan_hybrid_shard_size({"h0", "h0", "h0", "h1"}, 1), 1) << "an explicit size that fits every node";
}

}  // namespace
}  // namespace strata
