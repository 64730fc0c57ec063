// The CUDA caching allocator's stream tracking (label gpu): a block that a second stream
// used (cuda::record_stream) is not handed out again until the work that stream had queued
// at the free is done, then is. The second stream is held by a host function until the test
// releases it, so "still busy" is certain rather than a race with a long kernel (and each test
// checks that the hold is still in place before it relies on it).
#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "backend/cuda/cuda_backend.h"
#include "gpu/gpu_test.h"
#include "tensor/allocator_buckets.h"

namespace strata {
namespace {

using StreamAllocatorGpu = testing::GpuTest;

std::atomic<bool> release_side{false};
// Set when hold_stream returns: until then the side stream's later work has not run, which
// the tests check before each "still pending" assertion rather than assume.
std::atomic<bool> hold_done{false};

// Holds its stream until the test releases it (or a minute passes: a failed test never
// hangs the device for good).
void CUDART_CB hold_stream(void*) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!release_side.load() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  hold_done = true;
}

// A non-blocking stream (no implicit ordering with the default stream, like NCCL's comm
// stream) that is busy, and writes `block`, until released.
cudaStream_t busy_stream_writing(void* block, size_t bytes) {
  release_side = false;
  hold_done = false;
  cudaStream_t side = nullptr;
  EXPECT_EQ(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), cudaSuccess);
  EXPECT_EQ(cudaLaunchHostFunc(side, hold_stream, nullptr), cudaSuccess);
  EXPECT_EQ(cudaMemsetAsync(block, 0, bytes, side), cudaSuccess);
  return side;
}

const size_t kBlock = detail::allocator_block_size(4000);

TEST_F(StreamAllocatorGpu, BlockUsedByAnotherStreamIsReusedOnlyAfterIt) {
  cuda::synchronize();
  cuda_allocator::empty_cache();
  Tensor t = full({1000}, 1.0, {.device = gpu});
  cuda::synchronize();  // the fill is done before the side stream writes
  void* block = t.storage()->data();
  cudaStream_t side = busy_stream_writing(block, 4000);
  cuda::record_stream(t, side);
  const AllocatorStats before = cuda_allocator::stats(0);
  t = Tensor();  // freed while the side stream has yet to write it
  ASSERT_FALSE(hold_done.load()) << "the side stream was released before the checks";
  AllocatorStats s = cuda_allocator::stats(0);
  EXPECT_EQ(s.pending_bytes, before.pending_bytes + kBlock);
  EXPECT_EQ(s.cached_bytes, before.cached_bytes);
  EXPECT_EQ(s.in_use_bytes, before.in_use_bytes - kBlock);
  Tensor u = empty({1000}, {.device = gpu});
  EXPECT_NE(u.storage()->data(), block) << "handed out while the side stream still uses it";
  cuda_allocator::empty_cache();  // releases only what is reusable
  EXPECT_EQ(cuda_allocator::stats(0).pending_bytes, before.pending_bytes + kBlock);

  release_side = true;
  ASSERT_EQ(cudaStreamSynchronize(side), cudaSuccess);
  s = cuda_allocator::stats(0);  // polls the event
  EXPECT_EQ(s.pending_bytes, before.pending_bytes);
  EXPECT_EQ(s.cached_bytes, kBlock);
  Tensor v = empty({1000}, {.device = gpu});
  EXPECT_EQ(v.storage()->data(), block);
  EXPECT_EQ(cudaStreamDestroy(side), cudaSuccess);
}

// Without a record the block is the default stream's alone: reusable at once, no event.
TEST_F(StreamAllocatorGpu, UnrecordedBlockIsReusedAtOnce) {
  cuda::synchronize();
  cuda_allocator::empty_cache();
  void* block = nullptr;
  {
    Tensor t = empty({1000}, {.device = gpu});
    block = t.storage()->data();
  }
  EXPECT_EQ(cuda_allocator::stats(0).pending_bytes, 0u);
  Tensor u = empty({1000}, {.device = gpu});
  EXPECT_EQ(u.storage()->data(), block);
}

// Destroys `side` on a helper thread and waits for cudaStreamDestroy to return: true when it
// did while the stream's hold is still in place (the usual case: destroy does not wait for
// queued work). Under compute-sanitizer destroy waits for the stream's work, which the hold
// keeps from finishing: then the hold is released after 10 s and the result is false.
bool destroyed_while_held(cudaStream_t side) {
  std::atomic<bool> destroyed{false};
  cudaError_t status = cudaSuccess;
  std::thread destroyer([&] {
    status = cudaStreamDestroy(side);
    destroyed = true;
  });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!destroyed.load() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const bool held = destroyed.load() && !hold_done.load();
  if (!destroyed.load()) release_side = true;
  destroyer.join();
  EXPECT_EQ(status, cudaSuccess);
  return held;
}

// A stream destroyed while a tensor it used is alive (an NCCL group torn down before the
// tensors it reduced): retire_stream turns the record into an event, so the later free still
// waits for the stream's work and never names the destroyed stream. The stream's work is held
// by a host function until after the checks, and that it still is, is checked, not assumed.
TEST_F(StreamAllocatorGpu, RetiredStreamStillProtectsTheBlock) {
  cuda::synchronize();
  cuda_allocator::empty_cache();
  Tensor t = empty({1000}, {.device = gpu});
  void* block = t.storage()->data();
  cudaStream_t side = busy_stream_writing(block, 4000);
  cuda::record_stream(t, side);
  cuda_detail::retire_stream(0, side);
  if (!destroyed_while_held(side)) {
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    GTEST_SKIP() << "cudaStreamDestroy waited for the stream's queued work here (as under compute-sanitizer), "
                    "so a stream destroyed with work still queued cannot be set up";
  }
  const size_t pending_before = cuda_allocator::stats(0).pending_bytes;
  t = Tensor();
  ASSERT_FALSE(hold_done.load()) << "the side stream was released before the checks";
  EXPECT_EQ(cuda_allocator::stats(0).pending_bytes, pending_before + kBlock);
  Tensor u = empty({1000}, {.device = gpu});
  EXPECT_NE(u.storage()->data(), block);
  release_side = true;
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cuda_allocator::stats(0).pending_bytes, pending_before);
  Tensor v = empty({1000}, {.device = gpu});
  EXPECT_EQ(v.storage()->data(), block);
}

}  // namespace
}  // namespace strata
