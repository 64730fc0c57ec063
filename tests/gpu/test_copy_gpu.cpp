// Copies on one GPU (label gpu): a conversion between float32 and a 16-bit dtype where either
// side is a strided view runs on the device, bit for bit the CPU's conversion, and a bf16
// autocast training step of a GPT (fused and composed attention) makes no copy through
// host memory (each such copy waits for the device: host time that grows with the batch).
#include <gtest/gtest.h>

#include "backend/cuda/cuda_backend.h"
#include "gpu/gpu_test.h"
#include "strata/strata.h"

namespace strata {
namespace {

using CopyGpu = testing::GpuTest;
using testing::same_bits;

// Proves: strided float32 <-> bf16/fp16 conversions on the GPU equal the CPU's bit for bit
// (both round to nearest even) without a host round trip.
TEST_F(CopyGpu, StridedConversionsStayOnTheDeviceAndEqualTheCpu) {
  Generator gen(71);
  const Tensor x = randn({4, 6, 3, 8}, {}, &gen);  // a [B, T, 3, D]-like projection
  const Tensor view = x.select(2, 1).transpose(1, 2);
  const int64_t before = cuda_detail::same_device_host_round_trips();
  for (DType d16 : {DType::BFloat16, DType::Float16}) {
    const Tensor got = view.to(gpu).to(d16);  // strided read
    EXPECT_TRUE(same_bits(got.to(Device::cpu()), view.to(d16))) << d16;
    Tensor into = empty({4, 8, 6, 2}, {.device = gpu}).select(3, 0);  // strided write
    into.copy_(got);
    EXPECT_TRUE(same_bits(into.to(Device::cpu()), view.to(d16).to(DType::Float32))) << d16 << " written back";
    Tensor both = empty({4, 8, 6, 2}, {.dtype = d16, .device = gpu}).select(3, 1);  // strided to strided
    both.copy_(view.to(gpu));
    EXPECT_TRUE(same_bits(both.to(Device::cpu()), view.to(d16))) << d16 << " strided to strided";
  }
  EXPECT_EQ(cuda_detail::same_device_host_round_trips(), before);
}

// Proves: a bf16 autocast GPT training step (forward, backward, AdamW) on the GPU, with the
// fused attention and with the composed one, copies nothing through the host.
TEST_F(CopyGpu, AutocastGptStepMakesNoHostRoundTrip) {
  const bool was_fused = cuda::fused_attention();
  for (bool fused : {true, false}) {
    cuda::set_fused_attention(fused);
    nn::GPT model(nn::GPTConfig{.vocab_size = 97, .context = 32, .n_layer = 2, .n_head = 4, .n_embd = 64});
    model.to(gpu);
    optim::AdamW opt(model.parameters(), {.lr = 1e-3});
    Generator gen(72);
    const Tensor tokens = randint(0, 97, {2, 32}, {.dtype = DType::Int64}, &gen).to(gpu);
    const Tensor targets = randint(0, 97, {2, 32}, {.dtype = DType::Int64}, &gen).to(gpu);
    const int64_t before = cuda_detail::same_device_host_round_trips();
    for (int step = 0; step < 2; ++step) {
      Tensor loss;
      {
        autocast::Scope scope(DType::BFloat16);
        loss = model.loss(tokens, targets);
      }
      loss.backward();
      opt.step();
      opt.zero_grad();
    }
    EXPECT_EQ(cuda_detail::same_device_host_round_trips(), before) << (fused ? "fused" : "composed") << " attention";
  }
  cuda::set_fused_attention(was_fused);
}

}  // namespace
}  // namespace strata
