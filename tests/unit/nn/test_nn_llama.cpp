// nn::Llama: Hugging Face names and shapes, config errors, whole-model gradients against
// finite differences (float64), and ZeRO-3's unit predicate.
#include <gtest/gtest.h>

#include "gradcheck.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using namespace strata::nn;
using strata::testing::expect_error_mentions;

namespace {

LlamaConfig tiny_llama(DType dtype = DType::Float64) {
  return {.vocab_size = 11,
          .context = 8,
          .n_layer = 2,
          .n_head = 4,
          .n_kv_head = 2,
          .n_embd = 16,
          .intermediate_size = 24,
          .dtype = dtype};
}

Tensor tokens_for(const LlamaConfig& c, int64_t B, int64_t T, uint64_t seed) {
  Generator g(seed);
  Tensor t = zeros({B, T}, {.dtype = DType::Int64});
  for (int64_t i = 0; i < B * T; ++i) t.data<int64_t>()[i] = static_cast<int64_t>(g.random_u64() % c.vocab_size);
  return t;
}

}  // namespace

TEST(Llama, ParametersCarryHuggingFaceNamesAndShapes) {
  Llama model(tiny_llama(DType::Float32));
  std::map<std::string, Shape> shapes;
  for (const auto& [name, p] : model.named_parameters()) shapes[name] = p.shape();
  EXPECT_EQ(shapes.size(), 1 + 2 * 9 + 2u);
  EXPECT_EQ(shapes.at("embed_tokens.weight"), Shape({11, 16}));
  EXPECT_EQ(shapes.at("layers.1.input_layernorm.weight"), Shape({16}));
  EXPECT_EQ(shapes.at("layers.1.self_attn.q_proj.weight"), Shape({16, 16}));
  EXPECT_EQ(shapes.at("layers.1.self_attn.k_proj.weight"), Shape({8, 16}));  // 2 kv heads x 4
  EXPECT_EQ(shapes.at("layers.1.self_attn.v_proj.weight"), Shape({8, 16}));
  EXPECT_EQ(shapes.at("layers.1.self_attn.o_proj.weight"), Shape({16, 16}));
  EXPECT_EQ(shapes.at("layers.1.post_attention_layernorm.weight"), Shape({16}));
  EXPECT_EQ(shapes.at("layers.1.mlp.gate_proj.weight"), Shape({24, 16}));
  EXPECT_EQ(shapes.at("layers.1.mlp.up_proj.weight"), Shape({24, 16}));
  EXPECT_EQ(shapes.at("layers.1.mlp.down_proj.weight"), Shape({16, 24}));
  EXPECT_EQ(shapes.at("norm.weight"), Shape({16}));
  EXPECT_EQ(shapes.at("lm_head.weight"), Shape({11, 16}));
  // Untied: the head is its own tensor.
  EXPECT_NE(model.lm_head->weight.data<float>(), model.embed_tokens->weight.data<float>());
}

TEST(Llama, InitialisationIsSeededNormalWithUnitNorms) {
  Llama a(tiny_llama(DType::Float32)), b(tiny_llama(DType::Float32));
  LlamaConfig other = tiny_llama(DType::Float32);
  other.seed = 7;
  Llama c(other);
  EXPECT_EQ(a.lm_head->weight.to_vector<float>(), b.lm_head->weight.to_vector<float>());
  EXPECT_NE(a.lm_head->weight.to_vector<float>(), c.lm_head->weight.to_vector<float>());
  for (float w : a.norm->weight.to_vector<float>()) EXPECT_EQ(w, 1.0f);
  std::vector<float> q = a.layer(0).self_attn->q_proj->weight.to_vector<float>();
  double sq = 0;
  for (float v : q) sq += static_cast<double>(v) * v;
  EXPECT_NEAR(std::sqrt(sq / static_cast<double>(q.size())), 0.02, 0.004);  // normal(0, 0.02)
}

TEST(Llama, ForwardGivesLogitsAndAFiniteLoss) {
  LlamaConfig c = tiny_llama(DType::Float32);
  Llama model(c);
  Tensor tokens = tokens_for(c, 2, 8, 3);
  EXPECT_EQ(model.forward(tokens).shape(), Shape({2, 8, 11}));
  const double loss = model.loss(tokens, tokens_for(c, 2, 8, 4)).item();
  EXPECT_NEAR(loss, std::log(11.0), 0.2);  // near uniform at initialisation
}

TEST(Llama, ConfigErrorsNameTheField) {
  LlamaConfig c = tiny_llama();
  c.n_kv_head = 3;
  expect_error_mentions([&] { Llama m(c); }, {"n_head 4", "n_kv_head 3"});
  c = tiny_llama();
  c.n_embd = 12;  // head_dim 3: odd
  expect_error_mentions([&] { Llama m(c); }, {"head_dim 3", "even"});
  c = tiny_llama();
  c.intermediate_size = 0;
  expect_error_mentions([&] { Llama m(c); }, {"intermediate_size 0"});
  Llama model(tiny_llama());
  expect_error_mentions([&] { model.forward(tokens_for(tiny_llama(), 1, 9, 1)); }, {"Llama", "9", "context of 8"});
}

TEST(Llama, EveryGradientMatchesFiniteDifferences) {
  LlamaConfig c = tiny_llama();
  c.n_layer = 1;
  c.rope_theta = 100.0;  // larger angles at these few positions
  Llama model(c);
  // Make the norms non-trivial so their gradients are exercised away from 1.
  Generator g(5);
  for (auto* norm : {model.norm.get(), model.layer(0).input_layernorm.get()}) {
    NoGradGuard no_grad;
    norm->weight.copy_(add(randn({16}, {.dtype = DType::Float64}, &g), 1.0));
  }
  Tensor tokens = tokens_for(c, 2, 6, 8), targets = tokens_for(c, 2, 6, 9);
  model.zero_grad();
  model.loss(tokens, targets).backward();
  const double eps = 1e-6;
  for (auto& [name, p] : model.named_parameters()) {
    std::vector<double> analytic = p.grad().to_vector<double>();
    double* data = p.data<double>();
    // Every element of small tensors, a stride through large ones.
    const int64_t stride = std::max<int64_t>(1, p.numel() / 40);
    for (int64_t i = 0; i < p.numel(); i += stride) {
      NoGradGuard no_grad;
      const double saved = data[i];
      data[i] = saved + eps;
      const double plus = model.loss(tokens, targets).item();
      data[i] = saved - eps;
      const double minus = model.loss(tokens, targets).item();
      data[i] = saved;
      const double numeric = (plus - minus) / (2 * eps);
      EXPECT_NEAR(analytic[static_cast<size_t>(i)], numeric, 1e-7 + 1e-5 * std::fabs(numeric))
          << name << "[" << i << "]";
    }
  }
}

TEST(Llama, DecoderLayersAreZero3Units) {
  Llama model(tiny_llama());
  std::vector<std::string> units;
  for (auto& [path, m] : model.named_modules())
    if (is_transformer_block(path, *m)) units.push_back(path);
  EXPECT_EQ(units, (std::vector<std::string>{"layers.0", "layers.1"}));
}
