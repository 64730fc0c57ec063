// One training step of nn::GPT and nn::Llama on a GPU against the same step on the CPU
// (label gpu): the same initial weights and batch, forward (loss), backward (every
// parameter's gradient) and an AdamW step (every parameter after it). Every op of both
// models runs on CUDA here: embedding, layer/RMS norm, GEMMs, attention (causal,
// grouped-query), GELU / SiLU, rotary, cross-entropy, the fused AdamW. float64 agrees to
// 1e-10 (only exp, log and the GEMM's summation order differ); float32 to 2e-4 relative to
// each tensor's largest value (exact fp32 GEMMs in another order).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu/gpu_test.h"
#include "strata/strata.h"

namespace strata {
namespace {

using ModelStepGpu = testing::GpuTest;

struct Step {
  double loss = 0;
  std::vector<std::pair<std::string, Tensor>> grads, params;  // on the CPU
};

template <class Model, class Config>
Step train_step(const Config& config, Device device, const Tensor& tokens, const Tensor& targets) {
  Model model(config);
  if (!device.is_cpu()) model.to(device);
  optim::AdamW opt(model.parameters(), {.lr = 1e-2});
  Tensor loss = model.loss(tokens.to(device), targets.to(device));
  EXPECT_EQ(loss.device(), device);
  loss.backward();
  Step s;
  s.loss = loss.item();
  for (auto& [name, p] : model.named_parameters()) s.grads.emplace_back(name, p.grad().to(Device::cpu()));
  opt.step();
  for (auto& [name, p] : model.named_parameters()) s.params.emplace_back(name, p.detach().to(Device::cpu()));
  return s;
}

// max |a - b| / max |b| over each named tensor, the worst of them.
double worst_relative(const std::vector<std::pair<std::string, Tensor>>& got,
                      const std::vector<std::pair<std::string, Tensor>>& want, std::string& where) {
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].first, want[i].first);
    const double scale = std::max(max_abs_diff(want[i].second, zeros_like(want[i].second)), 1e-30);
    const double r = max_abs_diff(got[i].second, want[i].second) / scale;
    if (r > worst) {
      worst = r;
      where = want[i].first;
    }
  }
  return worst;
}

template <class Model, class Config>
void expect_gpu_step_equals_cpu(Config config, const char* name) {
  for (DType dtype : {DType::Float64, DType::Float32}) {
    config.dtype = dtype;
    const double tol = dtype == DType::Float64 ? 1e-10 : 2e-4;
    Generator gen(61);
    const Tensor tokens = randint(0, config.vocab_size, {3, 24}, {.dtype = DType::Int64}, &gen);
    const Tensor targets = randint(0, config.vocab_size, {3, 24}, {.dtype = DType::Int64}, &gen);
    const Step cpu = train_step<Model>(config, Device::cpu(), tokens, targets);
    const Step gpu = train_step<Model>(config, Device::cuda(0), tokens, targets);
    EXPECT_NEAR(gpu.loss, cpu.loss, tol * std::abs(cpu.loss)) << name << " " << dtype;
    std::string where;
    EXPECT_LT(worst_relative(gpu.grads, cpu.grads, where), tol) << name << " " << dtype << " gradient of " << where;
    EXPECT_LT(worst_relative(gpu.params, cpu.params, where), tol)
        << name << " " << dtype << " " << where << " after the AdamW step";
  }
}

TEST_F(ModelStepGpu, GptStepEqualsTheCpu) {
  expect_gpu_step_equals_cpu<nn::GPT>(
      nn::GPTConfig{.vocab_size = 97, .context = 32, .n_layer = 2, .n_head = 4, .n_embd = 64}, "GPT");
}

TEST_F(ModelStepGpu, LlamaStepEqualsTheCpu) {
  expect_gpu_step_equals_cpu<nn::Llama>(nn::LlamaConfig{.vocab_size = 97,
                                                        .context = 32,
                                                        .n_layer = 2,
                                                        .n_head = 4,
                                                        .n_kv_head = 2,
                                                        .n_embd = 64,
                                                        .intermediate_size = 96},
                                        "Llama");
}

}  // namespace
}  // namespace strata
