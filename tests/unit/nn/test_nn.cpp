#include <gtest/gtest.h>

#include "gradcheck.h"
#include "strata/nn/gpt.h"
#include "strata/strata.h"

using namespace strata;
using namespace strata::nn;

namespace {
GPTConfig tiny_config(DType dtype = DType::Float32) {
  return GPTConfig{.vocab_size = 11,
                   .context = 8,
                   .n_layer = 2,
                   .n_head = 2,
                   .n_embd = 8,
                   .dropout = 0.0,
                   .seed = 5,
                   .dtype = dtype};
}

Tensor tokens_for(const GPTConfig& c, int64_t B, int64_t T, uint64_t seed) {
  Generator g(seed);
  return randint(0, c.vocab_size, {B, T}, {.dtype = DType::Int64}, &g);
}
}  // namespace

TEST(Module, HierarchicalNamesInHuggingFaceOrder) {
  GPT model(tiny_config());
  std::vector<std::string> names;
  for (auto& [n, t] : model.named_parameters()) names.push_back(n);
  std::vector<std::string> expected = {"wte.weight",
                                       "wpe.weight",
                                       "h.0.ln_1.weight",
                                       "h.0.ln_1.bias",
                                       "h.0.attn.c_attn.weight",
                                       "h.0.attn.c_attn.bias",
                                       "h.0.attn.c_proj.weight",
                                       "h.0.attn.c_proj.bias",
                                       "h.0.ln_2.weight",
                                       "h.0.ln_2.bias",
                                       "h.0.mlp.c_fc.weight",
                                       "h.0.mlp.c_fc.bias",
                                       "h.0.mlp.c_proj.weight",
                                       "h.0.mlp.c_proj.bias"};
  ASSERT_GE(names.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(names[i], expected[i]);
  EXPECT_EQ(names.back(), "ln_f.bias");
  EXPECT_EQ(names.size(), 2u + 12u * 2 + 2u);
  auto params = model.named_parameters();
  EXPECT_EQ(params[4].second.shape(), Shape({24, 8}));  // c_attn [3C, C]
  for (auto& [n, t] : params) EXPECT_TRUE(t.requires_grad()) << n;
  // 12 C^2 + 13 C per block, plus embeddings and the final LayerNorm.
  EXPECT_EQ(model.num_parameters(), 2 * (12 * 64 + 13 * 8) + 11 * 8 + 8 * 8 + 16);
}

TEST(Module, SameSeedSameWeightsAndStateDictRoundTrip) {
  GPT a(tiny_config()), b(tiny_config());
  GPTConfig other = tiny_config();
  other.seed = 6;
  GPT c(other);
  EXPECT_EQ(max_abs_diff(a.wte->weight, b.wte->weight), 0.0);
  EXPECT_GT(max_abs_diff(a.wte->weight, c.wte->weight), 0.0);
  Tensor held = c.block(1).mlp->c_fc->weight;  // a handle kept elsewhere (optimizer)
  c.load_state_dict(a.state_dict());
  EXPECT_EQ(max_abs_diff(held, a.block(1).mlp->c_fc->weight), 0.0);
  StateDict bad = a.state_dict();
  bad.erase("ln_f.bias");
  EXPECT_THROW(c.load_state_dict(bad), Error);
  c.load_state_dict(bad, /*strict=*/false);
  bad = a.state_dict();
  bad["wte.weight"] = zeros({3, 3});
  try {
    c.load_state_dict(bad);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("wte.weight"), std::string::npos) << e.what();
  }
  bad = a.state_dict();
  bad["extra"] = zeros({1});
  EXPECT_THROW(c.load_state_dict(bad), Error);
}

TEST(Module, TrainEvalAndHooks) {
  GPT model(tiny_config());
  model.eval();
  EXPECT_FALSE(model.block(0).mlp->dropout->is_training());
  model.train();
  EXPECT_TRUE(model.block(0).mlp->dropout->is_training());
  int pre = 0, post = 0;
  model.h->operator[](1).register_forward_pre_hook([&](Module&) { ++pre; });
  model.h->operator[](1).register_forward_hook([&](Module&) { ++post; });
  model.forward(tokens_for(model.config(), 2, 4, 1));
  EXPECT_EQ(pre, 1);
  EXPECT_EQ(post, 1);
}

TEST(GPT, ShapesLossAndErrors) {
  GPT model(tiny_config());
  Tensor tokens = tokens_for(model.config(), 3, 5, 1);
  Tensor logits = model.forward(tokens);
  EXPECT_EQ(logits.shape(), Shape({3, 5, 11}));
  Tensor loss = model.loss(tokens, tokens_for(model.config(), 3, 5, 2));
  // An untrained model with small weights predicts nearly uniformly: loss ~ ln(vocab).
  EXPECT_NEAR(loss.item(), std::log(11.0), 0.1);
  loss.backward();
  for (auto& [n, t] : model.named_parameters()) EXPECT_TRUE(t.grad().defined()) << n;
  EXPECT_THROW(model.forward(tokens_for(model.config(), 1, 9, 1)), Error);  // beyond context
  EXPECT_THROW(model.forward(zeros({4}, {.dtype = DType::Int64})), Error);
  Tensor bad = full({1, 2}, 11, {.dtype = DType::Int64});
  EXPECT_THROW(model.forward(bad), Error);  // token id out of range
}

TEST(GPT, WholeModelGradientMatchesFiniteDifferences) {
  GPT model(tiny_config(DType::Float64));
  Tensor tokens = tokens_for(model.config(), 2, 4, 3);
  Tensor targets = tokens_for(model.config(), 2, 4, 4);
  model.loss(tokens, targets).backward();
  // Central differences on a sample of entries of every parameter.
  for (auto& [name, p] : model.named_parameters()) {
    std::vector<double> analytic = p.grad().to_vector<double>();
    double* data = p.data<double>();
    const int64_t stride = std::max<int64_t>(1, p.numel() / 5);
    for (int64_t i = 0; i < p.numel(); i += stride) {
      const double saved = data[i];
      const double eps = 1e-6;
      double plus, minus;
      {
        NoGradGuard g;
        data[i] = saved + eps;
        plus = model.loss(tokens, targets).item();
        data[i] = saved - eps;
        minus = model.loss(tokens, targets).item();
        data[i] = saved;
      }
      const double numeric = (plus - minus) / (2 * eps);
      EXPECT_NEAR(analytic[static_cast<size_t>(i)], numeric, 1e-7 + 1e-5 * std::fabs(numeric))
          << name << "[" << i << "]";
    }
  }
}
