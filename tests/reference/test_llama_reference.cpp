// nn::Llama against a float64 PyTorch LLaMA written from the Hugging Face layout
// (llama_reference.py): grouped-query attention (4 heads, 2 kv heads), targets with -100.
// In float64 the loss, every gradient and the parameters after 3 AdamW steps must agree to a
// relative error below 1e-10; the float32 model's loss and gradients within the bound derived
// from PyTorch's own float32 error (tests/float32_bound.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "file_test_util.h"
#include "float32_bound.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using strata::testing::rel_err;

namespace {

constexpr int64_t kSteps = 3;
constexpr double kLr = 1e-2, kWeightDecay = 0.1;

// The largest relative error over `model`'s parameters against ref[prefix + name], printed so
// that a run shows the figures.
double worst_over_parameters(nn::Module& model, const StateDict& ref, const std::string& prefix, bool of_grad,
                             const char* label) {
  double worst = 0;
  std::string where;
  for (auto& [name, p] : model.named_parameters()) {
    EXPECT_TRUE(!of_grad || p.grad().defined()) << name;
    const double err = rel_err(of_grad ? p.grad() : p, ref.at(prefix + name));
    if (err >= worst) {
      worst = err;
      where = name;
    }
  }
  std::printf("%-40s worst relative error %.2e (%s)\n", label, worst, where.c_str());
  return worst;
}

// Runs llama_reference.py on `input` (float64 weights), tokens and targets; returns its outputs.
StateDict pytorch_reference(const nn::LlamaConfig& c, StateDict input, const Tensor& tokens, const Tensor& targets) {
  strata::testing::TempDir dir;
  input["tokens"] = tokens;
  input["targets"] = targets;
  auto text = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return std::string(buf);
  };
  checkpoint::save_safetensors(dir.file("input.safetensors"), input,
                               {{"n_layer", std::to_string(c.n_layer)},
                                {"n_head", std::to_string(c.n_head)},
                                {"n_kv_head", std::to_string(c.n_kv_head)},
                                {"n_embd", std::to_string(c.n_embd)},
                                {"steps", std::to_string(kSteps)},
                                {"rope_theta", text(c.rope_theta)},
                                {"rms_norm_eps", text(c.rms_norm_eps)},
                                {"lr", text(kLr)},
                                {"weight_decay", text(kWeightDecay)}});
  std::string output;
  const int rc = strata::testing::run_python_script(
      "reference/llama_reference.py", {dir.file("input.safetensors"), dir.file("output.safetensors")}, &output);
  EXPECT_EQ(rc, 0) << output;
  if (rc != 0) return {};
  return checkpoint::load_safetensors(dir.file("output.safetensors")).tensors;
}

}  // namespace

TEST(Reference, LlamaMatchesPyTorch) {
  if (!strata::testing::python_has_module("torch"))
    GTEST_SKIP() << "/usr/bin/python3 has no torch (apt install python3-torch)";
  // rope_theta and rms_norm_eps away from their defaults, so that both are seen to be used.
  nn::LlamaConfig config{.vocab_size = 40,
                         .context = 16,
                         .n_layer = 2,
                         .n_head = 4,
                         .n_kv_head = 2,
                         .n_embd = 32,
                         .intermediate_size = 48,
                         .rope_theta = 500.0,
                         .rms_norm_eps = 1e-4,
                         .seed = 21};
  nn::Llama model32(config);
  Generator gen(5);
  Tensor tokens = randint(0, config.vocab_size, {3, 12}, {.dtype = DType::Int64}, &gen);
  Tensor targets = randint(0, config.vocab_size, {3, 12}, {.dtype = DType::Int64}, &gen);
  for (int64_t i : {2, 13, 14, 35}) targets.data<int64_t>()[i] = -100;

  // One set of weights for all: the float32 model's, exactly representable in float64.
  StateDict weights64;
  for (auto& [name, p] : model32.named_parameters()) weights64[name] = p.to(DType::Float64);
  const StateDict ref = pytorch_reference(config, weights64, tokens, targets);
  ASSERT_FALSE(ref.empty());
  const double ref_loss = ref.at("loss").item();

  nn::LlamaConfig config64 = config;
  config64.dtype = DType::Float64;
  nn::Llama model64(config64);
  model64.load_state_dict(weights64);
  optim::AdamW optimizer(optim::weight_decay_groups(model64.named_parameters(), kLr, kWeightDecay),
                         {.lr = kLr, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = kWeightDecay});
  for (int64_t s = 0; s < kSteps; ++s) {
    optimizer.zero_grad();
    Tensor loss = model64.loss(tokens, targets);
    loss.backward();
    if (s == 0) {
      const double err = std::fabs(loss.item() - ref_loss) / std::fabs(ref_loss);
      std::printf("%-40s relative error %.2e (loss %.15f)\n", "float64 loss", err, ref_loss);
      EXPECT_LT(err, 1e-12);
      EXPECT_LT(worst_over_parameters(model64, ref, "grad.", true, "float64 gradients"), 1e-10);
    }
    optimizer.step();
  }
  EXPECT_LT(worst_over_parameters(model64, ref, "param.", false, "float64 parameters after 3 AdamW steps"), 1e-10);

  // Float32 against PyTorch's float32 from the same weights, bounded by PyTorch's own float32
  // error against its float64 run (tests/float32_bound.h: the two frameworks' kernels, and the
  // GEMM kernels each CPU selects, add in other orders).
  Tensor loss32 = model32.loss(tokens, targets);
  loss32.backward();
  const double torch_loss32 = ref.at("loss32").item();
  // Sanity of the reference itself: PyTorch's float32 run is the float64 one up to float32
  // rounding (a loose ceiling, far above it), else the bounds below would be meaningless.
  ASSERT_LT(std::fabs(torch_loss32 - ref_loss) / std::fabs(ref_loss), 1e-3) << "PyTorch's float32 loss";
  EXPECT_TRUE(strata::test::within_float32_bound(std::fabs(loss32.item() - torch_loss32) / std::fabs(ref_loss),
                                                 std::fabs(torch_loss32 - ref_loss) / std::fabs(ref_loss),
                                                 "float32 loss"));
  for (auto& [name, p] : model32.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    const Tensor& torch32 = ref.at("grad32." + name);
    EXPECT_TRUE(strata::test::within_float32_bound(rel_err(p.grad(), torch32),
                                                   rel_err(torch32.to(DType::Float64), ref.at("grad." + name)),
                                                   "float32 gradient of " + name));
  }
}
