// CUDA tensors where no GPU code exists or no GPU is present: every path must throw a
// strata::Error naming the op and the device, never dereference a device pointer on the
// host. Runs without a GPU: the "CUDA" tensors wrap a dummy pointer that is never read.
#include <gtest/gtest.h>

#include <cstdint>

#include "strata/distributed/init.h"
#include "tensor/allocator_buckets.h"
#include "test_util.h"

namespace strata {
namespace {

using testing::error_of;
using testing::expect_contains;
using testing::expect_error_mentions;

// A float32 tensor on cuda:0 over a host block nobody may read through it: if a CPU loop
// did read it, the values would be garbage but the test would not crash, so the assertions
// on the thrown error are what catches a missing check.
struct FakeCuda {
  std::vector<float> backing = std::vector<float>(64, 1.0f);
  Tensor make(const Shape& shape, DType dtype = DType::Float32) {
    return from_blob(backing.data(), shape, dtype, {}, Device::cuda(0));
  }
};

TEST(CudaErrors, CpuOpsNameTheOpAndTheDevice) {
  FakeCuda f;
  Tensor a = f.make({2, 3});
  Tensor c = ones({2, 3});
  // Ops with a CUDA kernel reach the device's check, which refuses (no GPU here, or a
  // build without CUDA) before any kernel runs.
  for (const std::string& msg :
       {error_of([&] { (void)add(a, a); }), error_of([&] { (void)mul(a, 2.0); }), error_of([&] { (void)exp(a); }),
        error_of([&] { (void)sum(a); }), error_of([&] { (void)mean(a, {1}); })}) {
    expect_contains(msg, "cuda:0 is not available");
  }
  expect_error_mentions([&] { (void)matmul(a, f.make({3, 2})); }, {"matmul: cuda:0 is not available"});
  expect_error_mentions([&] { (void)linear(a, f.make({4, 3})); }, {"linear: cuda:0 is not available"});
  expect_error_mentions([&] { (void)sum(a); }, {"sum"});
  expect_error_mentions([&] { (void)max(a, 1); }, {"max", "cuda:0"});
  expect_error_mentions([&] { (void)gelu(a); }, {"gelu", "cuda:0"});
  expect_error_mentions([&] { (void)relu(a); }, {"relu", "cuda:0"});
  expect_error_mentions([&] { (void)softmax(a, -1); }, {"softmax", "cuda:0"});
  expect_error_mentions([&] { (void)layer_norm(a, Tensor(), Tensor()); }, {"layer_norm", "cuda:0"});
  expect_error_mentions([&] { (void)dropout(a, 0.5, true); }, {"dropout", "cuda:0"});
  Tensor idx = from_blob(f.backing.data(), {2}, DType::Int64, {}, Device::cuda(0));
  expect_error_mentions([&] { (void)embedding(idx, c); }, {"embedding", "cuda:0"});
  expect_error_mentions([&] { (void)embedding(idx, f.make({4, 2})); }, {"embedding", "cuda:0 is not available"});
  expect_error_mentions([&] { (void)cross_entropy(a, idx); }, {"cross_entropy", "cuda:0"});
  Tensor q = f.make({1, 1, 2, 3});
  // Without CUDA the attention refuses in its own name (on_device); with CUDA but no GPU it is
  // composed of other ops and the first, matmul, refuses.
  expect_error_mentions(
      [&] { (void)causal_attention(q, q, q); },
      {cuda::is_built() ? "matmul: cuda:0 is not available" : "causal_attention: cuda:0 is not available"});
  expect_error_mentions([&] { (void)cat({a, a}, 0); }, {"cat: cuda:0 is not available"});
  // An op without a CUDA implementation fails in its device switch, naming itself.
  Tensor where_idx = from_blob(f.backing.data(), {2, 3}, DType::Int64, {}, Device::cuda(0));
  expect_error_mentions([&] { (void)gather(a, 1, where_idx); }, {"gather", "no CUDA implementation"});
  expect_error_mentions([&] { (void)gt(a, a); }, {"gt: cuda:0 is not available"});
  Tensor mask = from_blob(f.backing.data(), {2, 3}, DType::Bool, {}, Device::cuda(0));
  expect_error_mentions([&] { (void)where(mask, a, a); }, {"where: cuda:0 is not available"});
  expect_error_mentions([&] { (void)masked_fill(a, mask, 0.0); }, {"masked_fill: cuda:0 is not available"});
  expect_error_mentions([&] { add_(a, a); }, {"add_", "cuda:0 is not available"});
  EXPECT_EQ(f.backing[0], 1.0f);  // nothing wrote through the device pointer
}

// Inputs on two devices: the op and both inputs (name, shape, device) are named, whichever
// of them is on the CPU.
TEST(CudaErrors, MixedDevicesNameBothInputs) {
  FakeCuda f;
  Tensor g = f.make({2, 3});
  Tensor c = ones({2, 3});
  expect_error_mentions([&] { (void)add(c, g); }, {"add: inputs are on different devices", "a of shape [2, 3] on cpu",
                                                   "b of shape [2, 3] on cuda:0"});
  expect_error_mentions([&] { (void)mul(g, c); }, {"mul", "a of shape [2, 3] on cuda:0", "b of shape [2, 3] on cpu"});
  expect_error_mentions([&] { (void)matmul(c, f.make({3, 2})); }, {"matmul", "on cpu", "on cuda:0"});
  expect_error_mentions([&] { (void)linear(c, ones({4, 3}), f.make({4})); }, {"linear", "input", "bias", "cuda:0"});
  expect_error_mentions([&] { (void)layer_norm(c, f.make({3}), Tensor()); }, {"layer_norm", "weight", "cuda:0"});
  Tensor idx = zeros({2}, {.dtype = DType::Int64});
  expect_error_mentions([&] { (void)embedding(idx, g); }, {"embedding", "indices", "weight", "cuda:0"});
  expect_error_mentions([&] { (void)cross_entropy(g, idx); }, {"cross_entropy", "logits", "targets", "cuda:0"});
  Tensor q = ones({1, 1, 2, 3});
  expect_error_mentions(
      [&] {
        (void)causal_attention(q, f.make({1, 1, 2, 3}), q);
      },
      {"causal_attention", "k", "cuda:0"});
  expect_error_mentions([&] { (void)cat({c, g}, 0); }, {"cat", "tensor 0", "tensor 1", "cuda:0"});
  expect_error_mentions([&] { add_(c, g); }, {"add_", "self", "other", "cuda:0"});
}

TEST(CudaErrors, HostAccessorsRefuseDeviceMemory) {
  FakeCuda f;
  Tensor a = f.make({4});
  expect_error_mentions([&] { (void)a.data<float>(); }, {"cuda:0", "host memory", ".to(Device::cpu())"});
  expect_error_mentions([&] { (void)a.raw_data(); }, {"cuda:0", "host memory"});
  // The device-agnostic pointer is allowed: it is what CUDA and NCCL code use.
  EXPECT_EQ(a.data_ptr(), static_cast<void*>(f.backing.data()));
}

// Where there is no usable GPU (a build without CUDA, or no GPU on this machine) every path
// that needs one says so, naming the device; nothing crashes.
TEST(CudaErrors, NoGpuMessages) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is visible: the no-GPU messages cannot be observed";
  const std::string why = cuda::is_built() ? "no usable CUDA device" : "strata was built without CUDA";
  EXPECT_EQ(cuda::device_count(), 0);
  expect_error_mentions([] { (void)zeros({2}, {.device = Device::cuda(0)}); }, {"cuda:0", why});
  expect_error_mentions([] { (void)Storage::allocate(16, Device::cuda(1)); }, {"cuda:1", why});
  expect_error_mentions([] { (void)ones({2}).to(Device::cuda(0)); }, {"cuda:0", why});
  expect_error_mentions([] { cuda::set_device(0); }, {"cuda:0", why});
  FakeCuda f;
  Tensor a = f.make({3});
  expect_error_mentions([&] { (void)a.to(Device::cpu()); }, {"cuda:0", why});
  expect_error_mentions([&] { (void)a.to_vector<float>(); }, {"cuda:0", why});
  expect_error_mentions([&] { (void)a.item(); }, {"item", "3 elements"});
  expect_error_mentions([&] { a.fill_(1.0); }, {"cuda:0", why});
  expect_error_mentions([&] { ones({3}).copy_(a); }, {"cuda:0", why});
  EXPECT_EQ(f.backing[0], 1.0f);  // untouched
  AllocatorStats s = cuda_allocator::stats(0);
  EXPECT_EQ(s.requests, 0u);
  EXPECT_EQ(s.in_use_bytes, 0u);
}

TEST(CudaErrors, AllocatorRounding) {
  EXPECT_EQ(detail::allocator_block_size(1), 512u);
  EXPECT_EQ(detail::allocator_block_size(513), 1024u);
  EXPECT_EQ(detail::allocator_block_size((size_t{1} << 21) + 1), (size_t{1} << 21) + (size_t{1} << 18));
}

// A group of one whose ops record what was issued (no MPI needed).
class RecordingGroup final : public dist::ProcessGroup {
 public:
  RecordingGroup() : ProcessGroup(0, 1, "recording", {0}) {}
  std::vector<std::string> log;

 protected:
  Placement placement() const override { return Placement::Any; }
  dist::WorkPtr do_all_reduce(Tensor&, dist::ReduceOp, const dist::OpDescription&) override {
    return done("all_reduce");
  }
  dist::WorkPtr do_broadcast(Tensor&, int, const dist::OpDescription&) override { return done("broadcast"); }
  dist::WorkPtr do_all_gather(Tensor& out, const Tensor& in, const dist::OpDescription&) override {
    out.copy_(in);
    return done("all_gather");
  }
  dist::WorkPtr do_reduce_scatter(Tensor&, const Tensor&, dist::ReduceOp, const dist::OpDescription&) override {
    return done("reduce_scatter");
  }
  dist::WorkPtr do_all_to_all(Tensor&, const Tensor&, const dist::OpDescription&) override {
    return done("all_to_all");
  }
  dist::WorkPtr do_send(const Tensor& t, int dst, const dist::OpDescription&) override {
    return done("send " + std::to_string(t.numel()) + " to " + std::to_string(dst));
  }
  dist::WorkPtr do_recv(Tensor& t, int src, const dist::OpDescription&) override {
    return done("recv " + std::to_string(t.numel()) + " from " + std::to_string(src));
  }
  dist::WorkPtr do_barrier(const dist::OpDescription&) override { return done("barrier"); }
  std::unique_ptr<ProcessGroup> do_split(const dist::SplitPlan&, const dist::OpDescription&) override {
    return nullptr;
  }

 private:
  struct Done final : dist::Work {
    bool is_completed() override { return true; }
    void wait() override {}
    void synchronize(std::chrono::milliseconds) override {}
    void synchronize() override {}
  };
  dist::WorkPtr done(std::string what) {
    log.push_back(std::move(what));
    return std::make_unique<Done>();
  }
};

TEST(CudaErrors, NcclGroupWithoutNcclOrGpu) {
  RecordingGroup g;
  if (!dist::nccl_is_built()) {
    expect_error_mentions([&] { (void)dist::new_nccl_group(g); }, {"recording", "strata was built without NCCL"});
  } else if (!cuda::is_available()) {
    expect_error_mentions([&] { (void)dist::new_nccl_group(g); }, {"cuda:0", "no usable CUDA device"});
  } else {
    GTEST_SKIP() << "NCCL and a GPU are present: tests/gpu covers new_nccl_group";
  }
  EXPECT_TRUE(g.log.empty());  // failed before any collective
}

TEST(CudaErrors, DefaultBatchSendRecvIssuesEveryOp) {
  RecordingGroup g;
  Tensor a = ones({3}), b = zeros({5});
  std::vector<dist::P2POp> ops{dist::P2POp::send(a, 0), dist::P2POp::recv(b, 0)};
  dist::WorkPtr w = g.batch_send_recv(ops);
  EXPECT_TRUE(w->is_completed());
  w->wait();
  ASSERT_EQ(g.log.size(), 2u);
  EXPECT_EQ(g.log[0], "send 3 to 0");
  EXPECT_EQ(g.log[1], "recv 5 from 0");
}

}  // namespace
}  // namespace strata
