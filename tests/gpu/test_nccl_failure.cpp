// An NCCL op that cannot complete, at world size 1 (label gpu; its own process, because the
// failure poisons the device for the rest of the process): the caller's stream is held by a
// host function, so the op queued behind it never starts. The watchdog must fail it after
// the group's timeout naming the op, its sequence number and the group, abort the
// communicator, refuse the device from then on, and keep the op's tensors until its queued
// work has drained.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "distributed/dist_test_util.h"
#include "strata/tensor/cuda.h"

namespace strata {
namespace {

std::atomic<bool> release_stream{false};

void CUDART_CB hold_stream(void*) {
  while (!release_stream.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(NcclFailure, AStuckOpTimesOutAbortsTheGroupAndPoisonsTheDevice) {
  if (!dist::nccl_is_built()) GTEST_SKIP() << "strata was built without NCCL";
  if (!cuda::is_available()) GTEST_SKIP() << "no GPU visible";
  if (dist::world().size() != 1) GTEST_SKIP() << "runs at world size 1";
  auto group = dist::new_nccl_group(dist::world());
  group->set_timeout(std::chrono::milliseconds(300));
  const Device gpu = Device::cuda(cuda::current_device());
  Tensor t = ones({1024}, {.device = gpu});
  group->all_reduce(t)->synchronize();  // a working op first: sequence number 0
  // strata's CUDA work runs on the legacy default stream (the current stream).
  ASSERT_EQ(cudaLaunchHostFunc(nullptr, hold_stream, nullptr), cudaSuccess);
  dist::WorkPtr stuck = group->all_reduce(t);
  const auto start = std::chrono::steady_clock::now();
  std::string error;
  try {
    stuck->synchronize();
  } catch (const Error& e) {
    error = e.what();
  }
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(contains(error, "all_reduce #1")) << error;
  EXPECT_TRUE(contains(error, "nccl(world)")) << error;
  EXPECT_TRUE(contains(error, "timed out")) << error;
  EXPECT_LT(waited, 10.0) << "the watchdog should fail the op shortly after 300 ms";
  // The group refuses new work, and the device refuses every later op and host read.
  EXPECT_TRUE(contains(test::error_of([&] { (void)group->all_reduce(t); }), "unusable")) << "group";
  EXPECT_TRUE(contains(test::error_of([&] { (void)t.to(Device::cpu()); }), "fatal communication error"));
  EXPECT_TRUE(contains(test::error_of([&] { (void)zeros({4}, {.device = gpu}); }), "fatal communication error"));
  release_stream = true;
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  group.reset();  // teardown after an abort: no hang, no crash
}

}  // namespace
}  // namespace strata
