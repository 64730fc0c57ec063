// One training step of nn::GPT and nn::Llama on a GPU against the same step on the CPU
// (label gpu): the same initial weights and batch, forward (loss), backward (every
// parameter's gradient) and an AdamW step (every parameter after it). Every op of both
// models runs on CUDA here: embedding, layer/RMS norm, GEMMs, attention (causal,
// grouped-query), GELU / SiLU, rotary, cross-entropy, the fused AdamW. float64 loss and
// gradients agree to 1e-10 relative (the algorithm's claim: only exp, log and the GEMMs'
// summation order differ); float32 ones within float32_bound of the CPU's own float32 error
// against its float64 run (tests/float32_bound.h: another GEMM order is another path). The
// parameters after the step are compared per element within the AdamW bound derived below,
// which follows each path's own gradient: AdamW's first step moves a parameter by about lr
// times the sign of its gradient, so where a gradient is rounding noise the two devices may
// move it by a full lr in opposite directions, and the bound says so.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "float32_bound.h"
#include "gpu/derived_bounds.h"
#include "gpu/gpu_test.h"
#include "strata/strata.h"
#include "strata_kernels/common/adam.h"

namespace strata {
namespace {

using ModelStepGpu = testing::GpuTest;
using Named = std::vector<std::pair<std::string, Tensor>>;

constexpr double kLr = 1e-2;
const optim::AdamWOptions kAdamW{.lr = kLr};

struct Step {
  double loss = 0;
  Named grads, params;  // on the CPU
};

template <class Model, class Config>
Step train_step(const Config& config, Device device, const Tensor& tokens, const Tensor& targets) {
  Model model(config);
  if (!device.is_cpu()) model.to(device);
  optim::AdamW opt(model.parameters(), kAdamW);
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

// max |a - b| / max |b| over one tensor.
double relative(const Tensor& a, const Tensor& b) {
  return max_abs_diff(a, b) / std::max(max_abs_diff(b, zeros_like(b)), 1e-30);
}

// The bound on |p_gpu - p_cpu| after AdamW's first step (strata_kernels/common/adam.h with
// the rounded scalars s of adam_scalars, step 1, m = v = 0), per element, from each path's
// own gradient. Both start from the same p and round p * decay_factor alike, so the paths
// differ only in the update, the same function on both (same kernel, no contraction)
//   U(g) = neg_step_size * (c1 g) / (sqrt(c2 g g) / bias_correction2_sqrt + eps)
// of different gradients. Each path computes U with 7 chained roundings (c1 g; c2 g, * g,
// sqrt (halves v's error), / bc2, + eps (positive terms); the division; * neg_step_size), so
// within gamma_7 |U| of U(its gradient); its last addition rounds once more (u |p'|):
//   |p'_gpu - p'_cpu| <= |U(g_gpu) - U(g_cpu)| + gamma_7 (|U(g_gpu)| + |U(g_cpu)|)
//                        + u (|p'_gpu| + |p'_cpu|) + floor,
// floor = 4 |neg_step_size| denorm_min / eps for a gradient so small that c1 g or v is
// subnormal (absolute, not relative, error there; sqrt(v) is then far below eps).
template <class T>
std::vector<double> adamw_step_bound(const Tensor& g_gpu, const Tensor& g_cpu, const Tensor& p_gpu,
                                     const Tensor& p_cpu) {
  const auto s =
      strata_kernels::adam_scalars<T>(kAdamW.lr, kAdamW.beta1, kAdamW.beta2, kAdamW.eps, kAdamW.weight_decay, true, 1);
  const double nss = s.neg_step_size, c1 = s.one_minus_beta1, c2 = s.one_minus_beta2;
  const double bc2 = s.bias_correction2_sqrt, eps = s.eps;
  auto update = [&](double g) { return nss * (c1 * g) / (std::sqrt(c2 * g * g) / bc2 + eps); };
  const double u = testing::unit_roundoff(g_cpu.dtype()), g7 = testing::gamma_k(7, u);
  const double floor = 4 * std::abs(nss) * std::numeric_limits<T>::denorm_min() / eps;
  const std::vector<double> ga = g_gpu.to_vector<double>(), gb = g_cpu.to_vector<double>();
  const std::vector<double> pa = p_gpu.to_vector<double>(), pb = p_cpu.to_vector<double>();
  std::vector<double> bound(ga.size());
  for (size_t i = 0; i < ga.size(); ++i) {
    const double ua = update(ga[i]), ub = update(gb[i]);
    bound[i] = std::abs(ua - ub) + g7 * (std::abs(ua) + std::abs(ub)) + u * (std::abs(pa[i]) + std::abs(pb[i])) + floor;
  }
  return bound;
}

// Gradients: float64 within 1e-10 relative per tensor; float32 within float32_bound of the
// CPU float32 run's own error against the CPU float64 run (`exact`), per tensor.
void expect_gradients_close(const Step& gpu, const Step& cpu, const Step* exact, const std::string& what) {
  double worst_ratio = 0;
  for (size_t i = 0; i < cpu.grads.size(); ++i) {
    const std::string& name = cpu.grads[i].first;
    ASSERT_EQ(gpu.grads[i].first, name);
    const double diff = relative(gpu.grads[i].second, cpu.grads[i].second);
    if (exact == nullptr) {
      EXPECT_LE(diff, 1e-10) << what << " gradient of " << name;
      continue;
    }
    const double reference = relative(cpu.grads[i].second.to(DType::Float64), exact->grads[i].second);
    EXPECT_TRUE(test::within_float32_bound(diff, reference, what + " gradient of " + name, false));
    if (reference > 0) worst_ratio = std::max(worst_ratio, diff / reference);
  }
  if (exact != nullptr) std::printf("float32 bound: %s gradients: worst ratio %.2f\n", what.c_str(), worst_ratio);
}

template <class Model, class Config>
void expect_gpu_step_equals_cpu(Config config, const char* name) {
  Generator gen(61);
  const Tensor tokens = randint(0, config.vocab_size, {3, 24}, {.dtype = DType::Int64}, &gen);
  const Tensor targets = randint(0, config.vocab_size, {3, 24}, {.dtype = DType::Int64}, &gen);
  config.dtype = DType::Float64;
  const Step exact = train_step<Model>(config, Device::cpu(), tokens, targets);
  for (DType dtype : {DType::Float64, DType::Float32}) {
    config.dtype = dtype;
    const std::string what = std::string(name) + " " + std::string(dtype_name(dtype));
    const bool f64 = dtype == DType::Float64;
    const Step cpu = f64 ? exact : train_step<Model>(config, Device::cpu(), tokens, targets);
    const Step gpu = train_step<Model>(config, Device::cuda(0), tokens, targets);
    const double loss_diff = std::abs(gpu.loss - cpu.loss) / std::abs(cpu.loss);
    if (f64) {
      EXPECT_LE(loss_diff, 1e-10) << what << " loss";
    } else {
      EXPECT_TRUE(test::within_float32_bound(loss_diff, std::abs(cpu.loss - exact.loss) / std::abs(exact.loss),
                                             what + " loss"));
    }
    expect_gradients_close(gpu, cpu, f64 ? nullptr : &exact, what);
    for (size_t i = 0; i < cpu.params.size(); ++i) {
      const Tensor &pg = gpu.params[i].second, &pc = cpu.params[i].second;
      const Tensor &gg = gpu.grads[i].second, &gc = cpu.grads[i].second;
      const std::vector<double> bound =
          f64 ? adamw_step_bound<double>(gg, gc, pg, pc) : adamw_step_bound<float>(gg, gc, pg, pc);
      EXPECT_LE(testing::worst_over_bound(pg, pc, bound), 1.0)
          << what << " " << cpu.params[i].first << " after the AdamW step";
    }
  }
}

// Proves: one GPT step (loss, every gradient, every parameter after AdamW) on the GPU equals
// the CPU's within the bounds above, in float64 and float32.
TEST_F(ModelStepGpu, GptStepEqualsTheCpu) {
  expect_gpu_step_equals_cpu<nn::GPT>(
      nn::GPTConfig{.vocab_size = 97, .context = 32, .n_layer = 2, .n_head = 4, .n_embd = 64}, "GPT");
}

// Proves: the same for one Llama step (RMS norm, rotary, grouped-query attention, SiLU).
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
