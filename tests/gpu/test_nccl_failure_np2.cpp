// An NCCL op one rank never joins, at world size 2 (label gpu; one GPU per rank, so it skips
// on a machine with fewer than two; its own process, because the failure poisons rank 0's
// device for the rest of the process). Rank 1 skips all_reduce #1 and waits in an MPI
// barrier instead. Rank 0's watchdog must fail the op after the group's timeout naming the
// op, the group and the missing rank (through the MPI side channel), abort the communicator
// and refuse its device from then on; then both ranks tear their groups down without a hang.
#include <gtest/gtest.h>

#include <chrono>

#include "distributed/dist_test_util.h"
#include "strata/tensor/cuda.h"

namespace strata {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(NcclFailureTwoRanks, AMissingRankIsNamedAndTheGroupAborts) {
  auto& world = dist::world();
  if (!dist::nccl_is_built()) GTEST_SKIP() << "strata was built without NCCL";
  if (world.size() != 2) GTEST_SKIP() << "runs at world size 2";
  if (cuda::device_count() < 2) GTEST_SKIP() << "needs two GPUs (one per rank), " << cuda::device_count() << " visible";
  ASSERT_EQ(cuda::current_device(), world.rank()) << "dist::init gives rank r the GPU r";
  auto group = dist::new_nccl_group(world);
  group->set_timeout(std::chrono::milliseconds(500));
  const Device gpu = Device::cuda(cuda::current_device());
  Tensor t = ones({1024}, {.device = gpu});
  group->all_reduce(t)->synchronize();  // a working op first: sequence number 0
  EXPECT_EQ(t.to(Device::cpu()).data<float>()[0], 2.0f);

  if (world.rank() == 0) {
    const auto start = std::chrono::steady_clock::now();
    const std::string error = test::error_of([&] { group->all_reduce(t)->synchronize(); });
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_TRUE(contains(error, "all_reduce #1")) << error;
    EXPECT_TRUE(contains(error, "nccl(world)")) << error;
    EXPECT_TRUE(contains(error, "timed out")) << error;
    EXPECT_TRUE(contains(error, "ranks 1 of 2 had not reached it")) << error;
    EXPECT_LT(waited, 15.0) << "the watchdog should fail the op shortly after 500 ms";
    EXPECT_TRUE(contains(test::error_of([&] { (void)group->all_reduce(t); }), "unusable")) << "group";
    EXPECT_TRUE(contains(test::error_of([&] { (void)t.to(Device::cpu()); }), "fatal communication error"));
  }
  // Rank 1 never enters #1; it meets rank 0 here once rank 0 has seen the failure.
  world.barrier()->wait();
  // Teardown with a peer whose communicator is aborted (rank 1's never completes #1's
  // partner): finalize or abort, but return.
  const auto start = std::chrono::steady_clock::now();
  group.reset();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30.0);
  world.barrier()->wait();
}

}  // namespace
}  // namespace strata
