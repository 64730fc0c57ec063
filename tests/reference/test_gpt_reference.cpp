// The GPT against PyTorch: same weights, same batch; the float32 loss and every float32
// gradient must agree within the bound derived from PyTorch's own float32 error against the
// float64 values (tests/float32_bound.h: the two frameworks' kernels add in other orders),
// and the parameters after 3 AdamW steps taken in float64 by both (relative error < 1e-10;
// 3e-13 seen).
#include <gtest/gtest.h>

#include <cmath>

#include "file_test_util.h"
#include "float32_bound.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using namespace strata::checkpoint;
using strata::testing::rel_err;

namespace {

// relative_error over the entries whose float64 reference gradient is not at rounding-noise
// level. The key part of c_attn.bias has an exactly zero gradient in exact arithmetic
// (softmax ignores a shift that is the same for every key), so both frameworks see only
// rounding noise there, and Adam's normalisation turns that noise into full-size updates of
// arbitrary sign. Returns the error and how many entries were left out.
std::pair<double, int64_t> relative_error_where_gradient(const Tensor& a, const Tensor& b, const Tensor& grad) {
  std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>(), vg = grad.to_vector<double>();
  double gmax = 0;
  for (double g : vg) gmax = std::max(gmax, std::fabs(g));
  double diff = 0, scale = 0;
  int64_t skipped = 0;
  for (size_t i = 0; i < va.size(); ++i) {
    scale = std::max(scale, std::fabs(vb[i]));
    if (std::fabs(vg[i]) <= 1e-10 * gmax) {
      ++skipped;
      continue;
    }
    diff = std::max(diff, std::fabs(va[i] - vb[i]));
  }
  return {scale == 0 ? diff : diff / scale, skipped};
}

}  // namespace

TEST(Reference, GptMatchesPyTorch) {
  if (!strata::testing::python_has_module("torch"))
    GTEST_SKIP() << "/usr/bin/python3 has no torch (apt install python3-torch)";
  strata::testing::TempDir dir;
  const int64_t B = 3, T = 16, steps = 3;
  const double lr = 1e-2, wd = 0.1;
  nn::GPTConfig config{.vocab_size = 64, .context = 16, .n_layer = 2, .n_head = 4, .n_embd = 32, .seed = 21};
  nn::GPT model(config);
  Generator gen(5);
  Tensor tokens = randint(0, config.vocab_size, {B, T}, {.dtype = DType::Int64}, &gen);
  Tensor targets = randint(0, config.vocab_size, {B, T}, {.dtype = DType::Int64}, &gen);
  targets.data<int64_t>()[3] = -100;  // ignored positions take part too
  targets.data<int64_t>()[20] = -100;

  StateDict input = model.state_dict();
  input["tokens"] = tokens;
  input["targets"] = targets;
  save_safetensors(dir.file("input.safetensors"), input,
                   {{"n_layer", "2"},
                    {"n_head", "4"},
                    {"n_embd", "32"},
                    {"steps", std::to_string(steps)},
                    {"lr", std::to_string(lr)},
                    {"weight_decay", std::to_string(wd)}});
  std::string output;
  int rc = strata::testing::run_python_script("reference/gpt_reference.py",
                                              {dir.file("input.safetensors"), dir.file("output.safetensors")}, &output);
  ASSERT_EQ(rc, 0) << output;
  StateDict ref = load_safetensors(dir.file("output.safetensors")).tensors;

  // The optimizer steps in float64 (see gpt_reference.py for why), from the same weights.
  nn::GPTConfig config64 = config;
  config64.dtype = DType::Float64;
  nn::GPT model64(config64);
  StateDict weights64;
  for (auto& [name, p] : model.named_parameters()) weights64[name] = p.to(DType::Float64);
  model64.load_state_dict(weights64);

  // Float32 against PyTorch's float32, bounded by PyTorch's own float32 error: its float64
  // gradients (grad64.*) and strata's float64 loss at the same weights stand in for exact.
  Tensor loss = model.loss(tokens, targets);
  loss.backward();
  const double ref_loss = ref.at("loss").item();
  double exact_loss = 0;
  {
    NoGradGuard no_grad;
    exact_loss = model64.loss(tokens, targets).item();
  }
  // Sanity of the reference itself: PyTorch's float32 loss is the float64 one up to float32
  // rounding (a loose ceiling, far above it), else the bounds below would be meaningless.
  ASSERT_LT(std::fabs(ref_loss - exact_loss) / std::fabs(exact_loss), 1e-3) << "PyTorch's float32 loss";
  EXPECT_TRUE(strata::test::within_float32_bound(std::fabs(loss.item() - ref_loss) / std::fabs(ref_loss),
                                                 std::fabs(ref_loss - exact_loss) / std::fabs(exact_loss), "loss"));
  for (auto& [name, p] : model.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    const Tensor& torch32 = ref.at("grad." + name);
    EXPECT_TRUE(strata::test::within_float32_bound(rel_err(p.grad(), torch32),
                                                   rel_err(torch32, ref.at("grad64." + name)), "gradient of " + name));
  }
  optim::AdamW optimizer(optim::weight_decay_groups(model64.named_parameters(), lr, wd),
                         {.lr = lr, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = wd});
  for (int64_t s = 0; s < steps; ++s) {
    optimizer.zero_grad();
    model64.loss(tokens, targets).backward();
    optimizer.step();
  }
  int64_t skipped = 0;
  for (auto& [name, p] : model64.named_parameters()) {
    auto [err, left_out] = relative_error_where_gradient(p, ref.at("param." + name), ref.at("grad64." + name));
    EXPECT_LT(err, 1e-10) << "parameter " << name << " after " << steps << " float64 AdamW steps";
    skipped += left_out;
    if (left_out) std::printf("%s: %lld entries at gradient-noise level\n", name.c_str(), (long long)left_out);
  }
  // In float64 only the key biases (n_embd per layer) are at noise level.
  EXPECT_EQ(skipped, config.n_layer * config.n_embd);
}
