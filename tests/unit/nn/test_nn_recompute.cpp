// Activation recompute (autograd::checkpoint, CausalLM::set_recompute): gradients bit for bit
// as without it (dropout included), float64 finite differences through a checkpoint, and
// the activation memory it saves.
#include <gtest/gtest.h>

#include <memory>

#include "gradcheck.h"
#include "strata/autograd/checkpoint.h"
#include "strata/strata.h"

using namespace strata;

namespace {

std::unique_ptr<nn::CausalLM> model_of(const std::string& family, int64_t width = 32) {
  if (family == "gpt")
    return std::make_unique<nn::GPT>(
        nn::GPTConfig{.vocab_size = 40, .context = 16, .n_layer = 3, .n_head = 4, .n_embd = width, .dropout = 0.1});
  return std::make_unique<nn::Llama>(nn::LlamaConfig{.vocab_size = 40,
                                                     .context = 16,
                                                     .n_layer = 3,
                                                     .n_head = 4,
                                                     .n_kv_head = 2,
                                                     .n_embd = width,
                                                     .intermediate_size = 3 * width});
}

std::pair<Tensor, Tensor> batch_data() {
  Generator g(3);
  return {randint(0, 40, {4, 16}, {.dtype = DType::Int64}, &g), randint(0, 40, {4, 16}, {.dtype = DType::Int64}, &g)};
}

// Loss and every gradient after one backward, with the default generator reseeded first.
std::pair<float, std::vector<std::vector<float>>> loss_and_grads(nn::CausalLM& model) {
  auto [x, y] = batch_data();
  manual_seed(11);
  model.zero_grad();
  Tensor loss = model.loss(x, y);
  loss.backward();
  std::vector<std::vector<float>> grads;
  for (const Tensor& p : model.parameters()) grads.push_back(p.grad().to_vector<float>());
  return {loss.to_vector<float>()[0], grads};
}

class Recompute : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(Recompute, GradientsAreBitIdentical) {
  auto model = model_of(GetParam());
  auto plain = loss_and_grads(*model);
  model->set_recompute(true);
  auto recomputed = loss_and_grads(*model);
  EXPECT_EQ(recomputed.first, plain.first);
  ASSERT_EQ(recomputed.second.size(), plain.second.size());
  for (size_t i = 0; i < plain.second.size(); ++i)
    EXPECT_EQ(recomputed.second[i], plain.second[i]) << "parameter " << i;
  // The dropout stream continues as without recompute: the next draw is the same.
  model->set_recompute(false);
  auto after_plain = loss_and_grads(*model);
  EXPECT_EQ(after_plain.first, plain.first);
}

TEST_P(Recompute, KeepsLessActivationMemory) {
  auto model = model_of(GetParam(), 64);
  auto [x, y] = batch_data();
  auto peak_of = [&](bool recompute) {
    model->set_recompute(recompute);
    model->zero_grad();
    model->loss(x, y).backward();  // gradients allocated and kept (zeroed, not dropped), so the
    model->zero_grad(false);       // next pass measures activations
    const size_t before = cpu_allocator::stats().in_use_bytes;
    cpu_allocator::reset_peak();
    model->loss(x, y).backward();
    return cpu_allocator::stats().peak_in_use_bytes - before;
  };
  const size_t without = peak_of(false), with = peak_of(true);
  std::printf("%s: peak above parameters and gradients %.1f KB without recompute, %.1f KB with\n", GetParam().c_str(),
              static_cast<double>(without) / 1024, static_cast<double>(with) / 1024);
  EXPECT_LT(with, without * 3 / 4);
}

INSTANTIATE_TEST_SUITE_P(Models, Recompute, ::testing::Values("gpt", "llama"));

TEST(ActivationCheckpoint, GradientsMatchFiniteDifferences) {
  auto fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{mul(tanh(matmul(in[0], in[1])), sum(in[0], {1}, true)), sigmoid(in[1])};
  };
  strata::testing::expect_gradients_match(
      [&](const std::vector<Tensor>& in) {
        auto out = autograd::checkpoint(fn, in);
        return add(sum(out[0]), mul(sum(out[1]), 0.5)).reshape({1});
      },
      {strata::testing::leaf64({3, 4}, 1), strata::testing::leaf64({4, 4}, 2)});
}

TEST(ActivationCheckpoint, WithoutGradItIsThePlainFunction) {
  Tensor x = full({2}, 3.0).set_requires_grad(true);
  NoGradGuard no_grad;
  auto out =
      autograd::checkpoint([](const std::vector<Tensor>& in) { return std::vector<Tensor>{mul(in[0], 2.0)}; }, {x});
  EXPECT_FALSE(out[0].requires_grad());
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{6, 6}));
}
