// The key/value cache and generate(): cached forwards equal full ones, cached generation
// equals uncached generation exactly (float64), and the sampling filters.
#include <gtest/gtest.h>

#include <memory>

#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using namespace strata::nn;
using strata::testing::expect_error_mentions;

namespace {

std::unique_ptr<CausalLM> make_model(const std::string& family, DType dtype) {
  if (family == "gpt")
    return std::make_unique<GPT>(
        GPTConfig{.vocab_size = 13, .context = 12, .n_layer = 2, .n_head = 2, .n_embd = 8, .dtype = dtype});
  return std::make_unique<Llama>(LlamaConfig{.vocab_size = 13,
                                             .context = 12,
                                             .n_layer = 2,
                                             .n_head = 4,
                                             .n_kv_head = 2,
                                             .n_embd = 16,
                                             .intermediate_size = 20,
                                             .dtype = dtype});
}

Tensor tokens(std::vector<int64_t> v, int64_t B) {
  const int64_t T = static_cast<int64_t>(v.size()) / B;
  return from_vector(v, {B, T});
}

class BothFamilies : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(BothFamilies, CachedForwardsEqualTheFullForward) {
  auto model = make_model(GetParam(), DType::Float64);
  Tensor seq = tokens({1, 5, 7, 2, 9, 3, 3, 0, 12, 4, 6, 8, 2, 2, 1, 11}, 2);  // [2, 8]
  NoGradGuard no_grad;
  Tensor full = model->forward(seq);  // [2, 8, 13]
  KVCache cache = model->make_cache();
  // A prompt of 3, then one token at a time, then 2 at once.
  std::vector<std::pair<int64_t, int64_t>> pieces = {{0, 3}, {3, 1}, {4, 1}, {5, 1}, {6, 2}};
  for (auto [start, len] : pieces) {
    Tensor part = model->forward(seq.narrow(1, start, len).contiguous(), &cache);
    std::vector<double> got = part.to_vector<double>(),
                        want = full.narrow(1, start, len).contiguous().to_vector<double>();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << "positions " << start << "+" << len;
  }
  EXPECT_EQ(cache.length(), 8);
}

TEST_P(BothFamilies, CachedGenerationEqualsUncachedExactly) {
  auto model = make_model(GetParam(), DType::Float64);
  Tensor prompt = tokens({1, 5, 7, 2, 9, 3}, 2);
  for (GenerateOptions options : {GenerateOptions{.greedy = true}, GenerateOptions{.temperature = 0.8, .seed = 3},
                                  GenerateOptions{.temperature = 1.5, .top_k = 4, .top_p = 0.9, .seed = 11}}) {
    options.use_cache = true;
    Tensor cached = generate(*model, prompt, 9, options);
    options.use_cache = false;
    Tensor uncached = generate(*model, prompt, 9, options);
    EXPECT_EQ(cached.shape(), Shape({2, 12}));
    EXPECT_EQ(cached.to_vector<int64_t>(), uncached.to_vector<int64_t>());
    EXPECT_EQ(cached.narrow(1, 0, 3).contiguous().to_vector<int64_t>(), prompt.to_vector<int64_t>());
  }
}

TEST_P(BothFamilies, SamplingIsSeededAndRestoresTrainingMode) {
  auto model = make_model(GetParam(), DType::Float32);
  Tensor prompt = tokens({4}, 1);
  GenerateOptions o{.temperature = 2.0, .seed = 5};
  Tensor a = generate(*model, prompt, 10, o), b = generate(*model, prompt, 10, o);
  EXPECT_EQ(a.to_vector<int64_t>(), b.to_vector<int64_t>());
  o.seed = 6;
  EXPECT_NE(a.to_vector<int64_t>(), generate(*model, prompt, 10, o).to_vector<int64_t>());
  EXPECT_TRUE(model->is_training());
  EXPECT_TRUE(grad_enabled());
}

TEST_P(BothFamilies, ErrorsNameTheProblem) {
  auto model = make_model(GetParam(), DType::Float32);
  expect_error_mentions([&] { generate(*model, tokens({1, 2, 3}, 1), 10); }, {"3", "10", "context of 12"});
  expect_error_mentions([&] { generate(*model, tokens({1}, 1), 2, {.temperature = 0.0}); }, {"temperature"});
  expect_error_mentions([&] { generate(*model, tokens({1}, 1), 2, {.top_p = 1.5}); }, {"top_p", "1.5"});
  KVCache cache = model->make_cache();
  expect_error_mentions([&] { model->forward(tokens({1, 2}, 1), &cache); }, {"grad mode"});
}

INSTANTIATE_TEST_SUITE_P(Generate, BothFamilies, ::testing::Values("gpt", "llama"));

TEST(SelectToken, GreedyTakesTheFirstMaximum) {
  const double logits[] = {0.5, 2.0, -1.0, 2.0};
  EXPECT_EQ(select_token(logits, 4, {.greedy = true}, 0.99), 1);
}

TEST(SelectToken, TopKKeepsOnlyTheKMostLikely) {
  const double logits[] = {3.0, 0.0, 2.9, 1.0, 2.8};
  // With top_k = 2 only tokens 0 and 2 can come out, for any draw.
  for (double u : {0.0, 0.3, 0.6, 0.999999}) {
    const int64_t t = select_token(logits, 5, {.top_k = 2}, u);
    EXPECT_TRUE(t == 0 || t == 2) << u;
  }
  EXPECT_EQ(select_token(logits, 5, {.top_k = 1}, 0.999), 0);
}

TEST(SelectToken, TopPKeepsTheSmallestSetReachingP) {
  // Probabilities about 0.665, 0.245, 0.09: top_p 0.7 keeps the first two.
  const double logits[] = {std::log(0.665), std::log(0.245), std::log(0.09)};
  EXPECT_EQ(select_token(logits, 3, {.top_p = 0.7}, 0.999), 1);
  EXPECT_EQ(select_token(logits, 3, {.top_p = 0.7}, 0.5), 0);
  EXPECT_EQ(select_token(logits, 3, {.top_p = 0.5}, 0.999), 0);  // the most likely alone
  // Without the filter, a draw near 1 lands on the last token.
  EXPECT_EQ(select_token(logits, 3, {}, 0.999), 2);
}

TEST(SelectToken, TemperatureSharpensTowardsTheMaximum) {
  const double logits[] = {1.0, 0.0};
  // p(token 0) = sigmoid(1 / T): 0.731 at T = 1, 0.99995 at T = 0.1.
  EXPECT_EQ(select_token(logits, 2, {.temperature = 1.0}, 0.9), 1);
  EXPECT_EQ(select_token(logits, 2, {.temperature = 0.1}, 0.9), 0);
}
