// The multi-tensor Adam, SGD and Lion steps on a GPU against the CPU executor (label gpu): the same chunk
// table and functor, so the results must be equal bit for bit (no contraction on either
// side, IEEE sqrt and division). Outputs are poisoned first, so an element the kernel never
// writes shows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "gpu/gpu_test.h"
#include "optim/multi_tensor.h"
#include "strata/strata.h"

namespace strata {
namespace {

using optim::multi_tensor::AdamHyper;
using optim::multi_tensor::AdamTensorArgs;

using MultiTensorOptimGpu = testing::GpuTest;

bool same_bytes(const Tensor& device_tensor, const Tensor& host) {
  const Tensor back = device_tensor.to(Device::cpu());
  return back.dtype() == host.dtype() && back.numel() == host.numel() &&
         std::memcmp(back.raw_data(), host.raw_data(), host.nbytes()) == 0;
}

// Sizes around the block (512 threads) and chunk (64 Ki) boundaries, one above 2^24, and
// 300 small tensors, as a model's biases and norms are.
std::vector<int64_t> test_sizes() {
  std::vector<int64_t> sizes{1, 511, 512, 513, 65535, 65536, 65537, (int64_t{1} << 24) + 3};
  for (int i = 0; i < 300; ++i) sizes.push_back(1 + (i * 7919) % 3000);
  return sizes;
}

TEST_F(MultiTensorOptimGpu, EqualsTheCpuExecutorBitForBitWithSixteenBitCopies) {
  const std::vector<int64_t> sizes = test_sizes();
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Generator gen(21);
    std::vector<AdamTensorArgs> host, dev;
    for (size_t i = 0; i < sizes.size(); ++i) {
      AdamTensorArgs a;
      const Shape shape{sizes[i]};
      a.param = randn(shape, {.dtype = dtype}, &gen);
      a.grad = randn(shape, {.dtype = dtype}, &gen);
      a.exp_avg = zeros(shape, {.dtype = dtype});
      a.exp_avg_sq = zeros(shape, {.dtype = dtype});
      a.lr = i % 2 == 0 ? 1e-3 : 2e-2;
      a.weight_decay = i % 3 == 0 ? 0.0 : 0.1;
      if (dtype == DType::Float32) a.low_copy = zeros(shape, {.dtype = i % 2 == 0 ? DType::BFloat16 : DType::Float16});
      AdamTensorArgs d = a;
      // Every fifth tensor on the device is a view one element into its buffer (as ZeRO's
      // shards of a flat buffer are): not 16-byte aligned, so the kernel's scalar path.
      const bool offset = i % 5 == 4;
      const auto to_gpu = [&](const Tensor& h) {
        if (!offset) return h.to(gpu);
        Tensor buffer = zeros({h.numel() + 1}, {.dtype = h.dtype(), .device = gpu});
        Tensor view = buffer.narrow(0, 1, h.numel());
        view.copy_(h);
        return view;
      };
      d.param = to_gpu(a.param);
      d.grad = to_gpu(a.grad);
      d.exp_avg = to_gpu(a.exp_avg);
      d.exp_avg_sq = to_gpu(a.exp_avg_sq);
      // Poison: NaN bit patterns the kernel must overwrite.
      if (a.low_copy.defined()) d.low_copy = full(shape, std::nan(""), {.dtype = a.low_copy.dtype(), .device = gpu});
      host.push_back(a);
      dev.push_back(d);
    }
    for (int64_t step = 1; step <= 3; ++step) {
      for (size_t i = 0; i < sizes.size(); ++i) host[i].step = dev[i].step = step;
      // Adam's L2 decay on odd steps, AdamW's decoupled decay on even ones.
      const AdamHyper h{.beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .decoupled_weight_decay = step % 2 == 0};
      optim::multi_tensor::fused_adam_step(host, h);
      optim::multi_tensor::fused_adam_step(dev, h);
    }
    cuda::synchronize();
    for (size_t i = 0; i < sizes.size(); ++i) {
      SCOPED_TRACE(::testing::Message() << dtype << " tensor " << i << " of " << sizes[i] << " elements");
      ASSERT_TRUE(same_bytes(dev[i].param, host[i].param));
      ASSERT_TRUE(same_bytes(dev[i].exp_avg, host[i].exp_avg));
      ASSERT_TRUE(same_bytes(dev[i].exp_avg_sq, host[i].exp_avg_sq));
      if (host[i].low_copy.defined()) {
        ASSERT_TRUE(same_bytes(dev[i].low_copy, host[i].low_copy));
      }
    }
  }
}

// optim::AdamW on CUDA parameters: the same steps as on the CPU, bit for bit.
TEST_F(MultiTensorOptimGpu, AdamWOnCudaParametersEqualsTheCpu) {
  Generator gen(4);
  Tensor cpu_w = randn({1000, 37}, {}, &gen), cpu_b = randn({37}, {}, &gen);
  Tensor gpu_w = cpu_w.to(gpu), gpu_b = cpu_b.to(gpu);
  for (Tensor* t : {&cpu_w, &cpu_b, &gpu_w, &gpu_b}) t->set_requires_grad(true);
  optim::AdamW cpu_opt({cpu_w, cpu_b}, {.lr = 1e-2}), gpu_opt({gpu_w, gpu_b}, {.lr = 1e-2});
  for (int step = 0; step < 5; ++step) {
    const Tensor gw = randn({1000, 37}, {}, &gen), gb = randn({37}, {}, &gen);
    cpu_w.set_grad(gw);
    cpu_b.set_grad(gb);
    gpu_w.set_grad(gw.to(gpu));
    gpu_b.set_grad(gb.to(gpu));
    cpu_opt.step();
    gpu_opt.step();
  }
  EXPECT_TRUE(same_bytes(gpu_w.detach(), cpu_w.detach()));
  EXPECT_TRUE(same_bytes(gpu_b.detach(), cpu_b.detach()));
  const StateDict s = gpu_opt.state_dict();
  EXPECT_TRUE(same_bytes(s.at("state.0.exp_avg_sq"), cpu_opt.state_dict().at("state.0.exp_avg_sq")));
}

// optim::SGD (momentum with dampening, then Nesterov) on CUDA parameters, bit for bit.
TEST_F(MultiTensorOptimGpu, SgdOnCudaParametersEqualsTheCpu) {
  for (const optim::SGDOptions o :
       {optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 1e-3},
        optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .nesterov = true}}) {
    Generator gen(8);
    Tensor cpu_w = randn({777, 65}, {}, &gen);
    Tensor gpu_w = cpu_w.to(gpu);
    cpu_w.set_requires_grad(true);
    gpu_w.set_requires_grad(true);
    optim::SGD cpu_opt({cpu_w}, o), gpu_opt({gpu_w}, o);
    for (int step = 0; step < 4; ++step) {
      const Tensor g = randn({777, 65}, {}, &gen);
      cpu_w.set_grad(g);
      gpu_w.set_grad(g.to(gpu));
      cpu_opt.step();
      gpu_opt.step();
    }
    EXPECT_TRUE(same_bytes(gpu_w.detach(), cpu_w.detach())) << "nesterov " << o.nesterov;
  }
}

// The multi-tensor Lion step: the CUDA kernel against the CPU executor, bit for bit, with
// 16-bit copies and unaligned views (the scalar path), over the sizes above.
TEST_F(MultiTensorOptimGpu, LionEqualsTheCpuExecutorBitForBit) {
  const std::vector<int64_t> sizes = test_sizes();
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Generator gen(23);
    std::vector<optim::multi_tensor::LionTensorArgs> host, dev;
    for (size_t i = 0; i < sizes.size(); ++i) {
      optim::multi_tensor::LionTensorArgs a;
      const Shape shape{sizes[i]};
      a.param = randn(shape, {.dtype = dtype}, &gen);
      a.grad = randn(shape, {.dtype = dtype}, &gen);
      a.exp_avg = randn(shape, {.dtype = dtype}, &gen);
      a.lr = i % 2 == 0 ? 1e-4 : 3e-3;
      a.weight_decay = i % 3 == 0 ? 0.0 : 0.1;
      if (dtype == DType::Float32) a.low_copy = zeros(shape, {.dtype = i % 2 == 0 ? DType::BFloat16 : DType::Float16});
      optim::multi_tensor::LionTensorArgs d = a;
      const bool offset = i % 5 == 4;
      const auto to_gpu = [&](const Tensor& h) {
        if (!offset) return h.to(gpu);
        Tensor view = zeros({h.numel() + 1}, {.dtype = h.dtype(), .device = gpu}).narrow(0, 1, h.numel());
        view.copy_(h);
        return view;
      };
      d.param = to_gpu(a.param);
      d.grad = to_gpu(a.grad);
      d.exp_avg = to_gpu(a.exp_avg);
      if (a.low_copy.defined()) d.low_copy = full(shape, std::nan(""), {.dtype = a.low_copy.dtype(), .device = gpu});
      host.push_back(a);
      dev.push_back(d);
    }
    for (int step = 0; step < 3; ++step) {
      optim::multi_tensor::fused_lion_step(host, {.beta1 = 0.9, .beta2 = 0.99});
      optim::multi_tensor::fused_lion_step(dev, {.beta1 = 0.9, .beta2 = 0.99});
    }
    cuda::synchronize();
    for (size_t i = 0; i < sizes.size(); ++i) {
      SCOPED_TRACE(::testing::Message() << dtype << " tensor " << i << " of " << sizes[i] << " elements");
      ASSERT_TRUE(same_bytes(dev[i].param, host[i].param));
      ASSERT_TRUE(same_bytes(dev[i].exp_avg, host[i].exp_avg));
      if (host[i].low_copy.defined()) {
        ASSERT_TRUE(same_bytes(dev[i].low_copy, host[i].low_copy));
      }
    }
  }
}

// optim::Lion on CUDA parameters (one without a gradient in the first step): the CPU's bits.
TEST_F(MultiTensorOptimGpu, LionOnCudaParametersEqualsTheCpu) {
  Generator gen(9);
  Tensor cpu_w = randn({513, 31}, {}, &gen), cpu_b = randn({31}, {}, &gen);
  Tensor gpu_w = cpu_w.to(gpu), gpu_b = cpu_b.to(gpu);
  for (Tensor* t : {&cpu_w, &cpu_b, &gpu_w, &gpu_b}) t->set_requires_grad(true);
  optim::Lion cpu_opt({cpu_w, cpu_b}, {.lr = 1e-3, .weight_decay = 0.1});
  optim::Lion gpu_opt({gpu_w, gpu_b}, {.lr = 1e-3, .weight_decay = 0.1});
  for (int step = 0; step < 4; ++step) {
    const Tensor gw = randn({513, 31}, {}, &gen), gb = randn({31}, {}, &gen);
    cpu_w.set_grad(gw);
    gpu_w.set_grad(gw.to(gpu));
    cpu_b.set_grad(step == 0 ? Tensor() : gb);
    gpu_b.set_grad(step == 0 ? Tensor() : gb.to(gpu));
    cpu_opt.step();
    gpu_opt.step();
  }
  EXPECT_TRUE(same_bytes(gpu_w.detach(), cpu_w.detach()));
  EXPECT_TRUE(same_bytes(gpu_b.detach(), cpu_b.detach()));
  EXPECT_TRUE(same_bytes(gpu_opt.state_dict().at("state.1.exp_avg"), cpu_opt.state_dict().at("state.1.exp_avg")));
}

// The fixed-order reductions on the GPU (lanes = threads, the tree in shared memory) give
// the CPU executor's bits: the sum of squares behind clip_grad_norm, and the unscale with
// its inf/nan flag.
TEST_F(MultiTensorOptimGpu, GradientReductionsEqualTheCpuBitForBit) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Generator gen(31);
    std::vector<Tensor> host, dev;
    for (int64_t n : test_sizes()) {
      host.push_back(randn({n}, {.dtype = dtype}, &gen));
      dev.push_back(host.back().to(gpu));
    }
    const double cpu_sum = optim::multi_tensor::sum_of_squares(host);
    const double gpu_sum = optim::multi_tensor::sum_of_squares(dev);
    EXPECT_EQ(std::memcmp(&cpu_sum, &gpu_sum, sizeof cpu_sum), 0) << dtype << ": " << cpu_sum << " vs " << gpu_sum;

    EXPECT_FALSE(optim::multi_tensor::unscale_and_check(host, 0.125));
    EXPECT_FALSE(optim::multi_tensor::unscale_and_check(dev, 0.125));
    for (size_t i = 0; i < host.size(); ++i) ASSERT_TRUE(same_bytes(dev[i], host[i])) << dtype << " tensor " << i;
    // An inf deep in the tensor above 2^24 elements.
    Tensor bad = dev[7].narrow(0, (int64_t{1} << 24) - 5, 1);
    bad.copy_(full({1}, std::numeric_limits<double>::infinity(), {.dtype = dtype}));
    EXPECT_TRUE(optim::multi_tensor::unscale_and_check(dev, 1.0)) << dtype;
  }
}

// clip_grad_norm on CUDA gradients: the norm and the clipped gradients equal the CPU's.
TEST_F(MultiTensorOptimGpu, ClipGradNormOnCudaEqualsTheCpu) {
  Generator gen(12);
  std::vector<Tensor> cpu_params, gpu_params;
  for (int64_t n : {int64_t{70001}, int64_t{3}, int64_t{4096}}) {
    Tensor p = zeros({n});
    p.set_requires_grad(true);
    p.set_grad(randn({n}, {}, &gen));
    Tensor q = zeros({n}, {.device = gpu});
    q.set_requires_grad(true);
    q.set_grad(p.grad().to(gpu));
    cpu_params.push_back(p);
    gpu_params.push_back(q);
  }
  const double cpu_norm = optim::clip_grad_norm(cpu_params, 1.0);
  const double gpu_norm = optim::clip_grad_norm(gpu_params, 1.0);
  EXPECT_EQ(cpu_norm, gpu_norm);
  EXPECT_GT(cpu_norm, 1.0);  // it did clip
  for (size_t i = 0; i < cpu_params.size(); ++i) EXPECT_TRUE(same_bytes(gpu_params[i].grad(), cpu_params[i].grad()));
}

// GradScaler over CUDA gradients: a step with an inf is skipped and backs off, as on the CPU.
TEST_F(MultiTensorOptimGpu, GradScalerSkipsAndUnscalesOnCuda) {
  Tensor w = ones({1000}, {.device = gpu});
  w.set_requires_grad(true);
  optim::AdamW opt({w}, {.lr = 0.1});
  optim::GradScaler scaler({.init_scale = 256});
  Tensor g = full({1000}, 256.0 * 0.5);
  g.data<float>()[999] = std::numeric_limits<float>::infinity();
  w.set_grad(g.to(gpu));
  EXPECT_FALSE(scaler.step(opt));
  scaler.update();
  EXPECT_EQ(scaler.scale_value(), 128);
  EXPECT_EQ(w.detach().to(Device::cpu()).to_vector<float>(), std::vector<float>(1000, 1.0f));
  w.set_grad(full({1000}, 128.0 * 0.5, {.device = gpu}));
  EXPECT_TRUE(scaler.step(opt));
  scaler.update();
  // The unscaled gradient was 0.5 everywhere: AdamW's first step moves each weight by lr.
  const std::vector<float> moved = w.detach().to(Device::cpu()).to_vector<float>();
  EXPECT_NEAR(moved[0], 1.0f - 0.1f * 0.01f - 0.1f, 1e-6);
  EXPECT_EQ(moved[0], moved[999]);
}

}  // namespace
}  // namespace strata
