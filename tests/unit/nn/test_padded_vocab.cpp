// A padded vocabulary (config.padded_vocab_size): the padded model computes what the unpadded
// one does, its padding rows start at zero and stay zero through AdamW with weight decay, and
// neither the loss nor generation ever sees a padding id, even when its logits would win.
//
// Padded against unpadded (float64): both compute the same exact values; the head's GEMMs
// only run over more rows, whose products are exact zeros, so the results differ at most by
// float64 reordering of the same sums (docs/testing.md "Bounds": float64 where the claim is
// about the algorithm). kRelative bounds that. Where the paths run the same kernels on the
// same shapes (nonzero padding against zero padding), the comparison is bitwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>

#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using namespace strata::nn;
using strata::testing::error_of;
using strata::testing::expect_contains;

namespace {

constexpr int64_t kVocab = 13;
constexpr double kRelative = 1e-12;

std::unique_ptr<CausalLM> make_model(const std::string& family, int64_t padded, uint64_t seed = 7) {
  if (family == "gpt")
    return std::make_unique<GPT>(GPTConfig{.vocab_size = kVocab,
                                           .padded_vocab_size = padded,
                                           .context = 8,
                                           .n_layer = 2,
                                           .n_head = 2,
                                           .n_embd = 8,
                                           .seed = seed,
                                           .dtype = DType::Float64});
  return std::make_unique<Llama>(LlamaConfig{.vocab_size = kVocab,
                                             .padded_vocab_size = padded,
                                             .context = 8,
                                             .n_layer = 2,
                                             .n_head = 4,
                                             .n_kv_head = 2,
                                             .n_embd = 16,
                                             .intermediate_size = 20,
                                             .seed = seed,
                                             .dtype = DType::Float64});
}

// The tensors whose rows are the vocabulary (GPT's tied wte; Llama's embedding and head).
bool is_vocab_table(const std::string& name) {
  return name == "wte.weight" || name == "embed_tokens.weight" || name == "lm_head.weight";
}

Tensor padding_rows(const Tensor& t) { return t.narrow(0, kVocab, t.size(0) - kVocab); }

double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : t.contiguous().to_vector<double>()) m = std::max(m, std::fabs(v));
  return m;
}

bool all_zero(const Tensor& t) { return max_abs(t) == 0.0; }

// The parameter `name` of `model` (checked).
Tensor parameter(const Module& model, const std::string& name) {
  for (const auto& [n, t] : model.named_parameters())
    if (n == name) return t;
  STRATA_FAIL("no parameter ", name);
}

// Copies `from`'s parameters into the first rows of `to`'s (its padding rows stay).
void copy_real_rows(const Module& from, Module& to) {
  NoGradGuard no_grad;
  for (const auto& [name, src] : from.named_parameters()) parameter(to, name).narrow(0, 0, src.size(0)).copy_(src);
}

std::pair<Tensor, Tensor> batch(uint64_t seed) {
  Generator gen(seed);
  Tensor tokens = randint(0, kVocab, {3, 8}, {.dtype = DType::Int64}, &gen);
  Tensor targets = randint(0, kVocab, {3, 8}, {.dtype = DType::Int64}, &gen);
  targets.data<int64_t>()[5] = -100;
  return {tokens, targets};
}

class PaddedVocabFamilies : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST(PaddedVocab, RoundsUpAndRefusesASmallerSizeNamingBoth) {
  EXPECT_EQ(pad_vocab_size(50257, 128), 50304);
  EXPECT_EQ(pad_vocab_size(256, 128), 256);
  EXPECT_EQ(pad_vocab_size(13, 1), 13);
  expect_contains(error_of([] { (void)pad_vocab_size(13, 0); }), "multiple 0");
  expect_contains(error_of([] { GPT(GPTConfig{.vocab_size = 20, .padded_vocab_size = 16}); }),
                  "GPT: padded_vocab_size 16 is smaller than vocab_size 20");
  expect_contains(error_of([] { Llama(LlamaConfig{.vocab_size = 20, .padded_vocab_size = 19}); }),
                  "Llama: padded_vocab_size 19 is smaller than vocab_size 20");
  // 0 and vocab_size both mean no padding.
  EXPECT_EQ(GPT(GPTConfig{.vocab_size = 20, .padded_vocab_size = 20}).padded_vocab_size(), 20);
  EXPECT_EQ(GPT(GPTConfig{.vocab_size = 20}).padded_vocab_size(), 20);
}

TEST_P(PaddedVocabFamilies, PaddedModelEqualsTheUnpaddedOneAndItsPaddingStaysZero) {
  auto plain = make_model(GetParam(), 0);
  auto padded = make_model(GetParam(), 24);
  ASSERT_EQ(padded->padded_vocab_size(), 24);
  int tables = 0;
  for (const auto& [name, p] : padded->named_parameters()) {
    if (!is_vocab_table(name)) continue;
    ++tables;
    EXPECT_EQ(p.size(0), 24) << name;
    EXPECT_TRUE(all_zero(padding_rows(p))) << name << ": padding rows start at zero";
  }
  EXPECT_EQ(tables, GetParam() == "gpt" ? 1 : 2);  // GPT's head is tied to wte, Llama's is not
  copy_real_rows(*plain, *padded);

  optim::AdamW plain_opt(plain->parameters(), {.lr = 1e-2, .weight_decay = 0.1});
  optim::AdamW padded_opt(padded->parameters(), {.lr = 1e-2, .weight_decay = 0.1});
  for (uint64_t step = 0; step < 4; ++step) {
    auto [x, y] = batch(step + 1);
    Tensor a = plain->loss(x, y), b = padded->loss(x, y);
    EXPECT_NEAR(b.item(), a.item(), kRelative * std::fabs(a.item())) << "step " << step;
    a.backward();
    b.backward();
    for (const auto& [name, p] : plain->named_parameters()) {
      const Tensor q = parameter(*padded, name);
      const Tensor real = q.grad().narrow(0, 0, p.size(0));
      EXPECT_LE(max_abs_diff(real, p.grad()), kRelative * max_abs(p.grad())) << name << " step " << step;
      if (is_vocab_table(name)) {
        EXPECT_TRUE(all_zero(padding_rows(q.grad()))) << name << ": padding gradient";
      }
    }
    plain_opt.step();
    padded_opt.step();
    plain_opt.zero_grad();
    padded_opt.zero_grad();
  }
  for (const auto& [name, p] : padded->named_parameters()) {
    if (is_vocab_table(name)) {
      EXPECT_TRUE(all_zero(padding_rows(p))) << name << ": padding after AdamW";
    }
  }
}

TEST_P(PaddedVocabFamilies, LogitsAndGenerationNeverOfferAPaddingId) {
  auto model = make_model(GetParam(), 40);  // 27 padding rows: two per real row and one more
  const auto [x, y] = batch(9);
  Tensor loss_zero_padding = model->loss(x, y);
  loss_zero_padding.backward();
  std::map<std::string, Tensor> grads;
  for (const auto& [name, p] : model->named_parameters()) grads[name] = p.grad().clone();
  model->zero_grad();

  // Padding rows +-100 x each real head row: for any hidden state one of them beats every
  // real logit (the largest |h . w_j| times 100), so an unmasked argmax would pick padding.
  {
    NoGradGuard no_grad;
    for (auto& [name, p] : model->named_parameters()) {
      if (name != "wte.weight" && name != "lm_head.weight") continue;
      for (int64_t j = 0; j < kVocab; ++j) {
        padding_rows(p).select(0, 2 * j).copy_(mul(p.select(0, j), 100.0));
        padding_rows(p).select(0, 2 * j + 1).copy_(mul(p.select(0, j), -100.0));
      }
    }
    Tensor all = model->local_logits(x, nullptr);  // every row of the head
    ASSERT_EQ(all.size(-1), 40);
    Tensor best = argmax(all, -1);
    for (int64_t id : best.contiguous().to_vector<int64_t>()) EXPECT_GE(id, kVocab) << "padding must win unmasked";
    EXPECT_EQ(model->forward(x).shape(), Shape({3, 8, kVocab}));
  }
  // The loss and every gradient but the head's padding rows: bit for bit as with zero padding.
  Tensor loss = model->loss(x, y);
  EXPECT_EQ(loss.item(), loss_zero_padding.item());
  loss.backward();
  for (const auto& [name, p] : model->named_parameters()) {
    EXPECT_EQ(max_abs_diff(p.grad(), grads.at(name)), 0.0) << name;
    if (is_vocab_table(name)) {
      EXPECT_TRUE(all_zero(padding_rows(p.grad()))) << name;
    }
  }
  // Greedy and sampled generation, with and without the cache, pick real words only.
  const Tensor prompt = x.narrow(1, 0, 2).contiguous();
  for (bool greedy : {true, false})
    for (bool cache : {true, false}) {
      Tensor out = generate(*model, prompt, 6, {.greedy = greedy, .seed = 5, .use_cache = cache});
      for (int64_t id : out.to_vector<int64_t>()) EXPECT_LT(id, kVocab) << "greedy " << greedy << " cache " << cache;
    }
}

INSTANTIATE_TEST_SUITE_P(Families, PaddedVocabFamilies, ::testing::Values("gpt", "llama"));
