// A GPT and a Llama forward+backward under bfloat16 autocast with 16-bit activations
// (strata/ops/autocast.h), on the CPU executor: loss and gradients against the float32 step
// within a bound derived from the roundings on the path, and the dtype conversions of an
// autocast GPT step counted exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "strata/strata.h"
#include "test_util.h"

namespace strata {
namespace {

constexpr double kU = 0x1p-8;  // bfloat16's unit roundoff

struct Step {
  double loss = 0;
  std::vector<Tensor> grads;
  autocast::Counters counters;
};

template <class Model>
Step run_step(Model& model, const Tensor& tokens, const Tensor& targets, std::optional<autocast::Options> options) {
  for (Tensor p : model.parameters()) p.set_grad(zeros_like(p));
  autocast::reset_counters();
  Tensor loss;
  {
    autocast::Scope scope(DType::BFloat16, options.value_or(autocast::Options{}), options.has_value());
    loss = model.loss(tokens, targets);
  }
  loss.backward();
  Step s{loss.item(), {}, autocast::counters()};
  for (const Tensor& p : model.parameters()) s.grads.push_back(p.grad().clone());
  return s;
}

double norm(const std::vector<Tensor>& ts) {
  double s = 0;
  for (const Tensor& t : ts)
    for (double v : t.to_vector<double>()) s += v * v;
  return std::sqrt(s);
}

double diff_norm(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const std::vector<double> va = a[i].to_vector<double>(), vb = b[i].to_vector<double>();
    for (size_t j = 0; j < va.size(); ++j) s += (va[j] - vb[j]) * (va[j] - vb[j]);
  }
  return std::sqrt(s);
}

// The bound: every bfloat16 rounding on a value's way to the loss perturbs it by at most u
// relatively. A GPT block rounds 14 times on its path (ln_1 out, the qkv weight and output,
// scores, probabilities, attention out, the proj weight and output, ln_2 out, the fc weight
// and output, gelu out, the second proj weight and output), the head 3 times (ln_f out, wte,
// logits): R = 14 L + 3 (a Llama block: 2 norms, 7 weights and 7 outputs, q/k after rotary,
// scores, probabilities, silu, the gate product: 20 L + 3). To first order with growth factor
// 1 per op (norms and softmax are contractions on normalised data at this init), the loss
// moves by at most R u |loss|, and the gradients (forward and backward paths both cross R
// roundings) by 2 R u ||g|| in norm.
template <class Model>
void expect_step_near_float32(Model& model, int64_t vocab, int64_t roundings_on_path) {
  Generator gen(31);
  const Tensor tokens = randint(0, vocab, {2, 16}, {.dtype = DType::Int64}, &gen);
  const Tensor targets = randint(0, vocab, {2, 16}, {.dtype = DType::Int64}, &gen);
  const Step f32 = run_step(model, tokens, targets, std::nullopt);
  const Step bf16 = run_step(model, tokens, targets, autocast::Options{.activations = true});
  const double r = static_cast<double>(roundings_on_path);
  EXPECT_LE(std::abs(bf16.loss - f32.loss), r * kU * std::abs(f32.loss)) << bf16.loss << " vs " << f32.loss;
  EXPECT_NE(bf16.loss, f32.loss) << "autocast changed nothing";
  const double rel = diff_norm(bf16.grads, f32.grads) / norm(f32.grads);
  EXPECT_LE(rel, 2 * r * kU) << "relative gradient difference";
  std::printf("autocast step: loss %.6f vs %.6f, gradient relative difference %.3g (bound %.3g)\n", bf16.loss, f32.loss,
              rel, 2 * r * kU);
  for (size_t i = 0; i < bf16.grads.size(); ++i) EXPECT_EQ(bf16.grads[i].dtype(), DType::Float32);
}

TEST(AutocastModelStep, GptStepWith16BitActivationsIsNearFloat32) {
  const int64_t layers = 2;
  nn::GPT gpt({.vocab_size = 64, .context = 16, .n_layer = layers, .n_head = 2, .n_embd = 32, .seed = 7});
  expect_step_near_float32(gpt, 64, 14 * layers + 3);
}

TEST(AutocastModelStep, LlamaStepWith16BitActivationsIsNearFloat32) {
  const int64_t layers = 2;
  nn::Llama llama({.vocab_size = 64,
                   .context = 16,
                   .n_layer = layers,
                   .n_head = 4,
                   .n_kv_head = 2,
                   .n_embd = 32,
                   .intermediate_size = 64,
                   .seed = 8});
  expect_step_near_float32(llama, 64, 20 * layers + 3);
}

// The conversions of one GPT forward+backward (CPU executor; the CPU's widening of 16-bit
// operands for its float32 kernels is its emulation of 16-bit loads and not counted).
//   parameter casts: one per parameter a product reads, once per step (weight cache):
//     8 per block (c_attn, attn.c_proj, c_fc, mlp.c_proj: weight and bias) + wte (tied head).
//   other conversions, 16-bit activations: layer_norm, gelu, the residual add,
//   cross_entropy and the attention softmax read and write 16-bit in their kernels, so
//   none runs a conversion forward; what is left is in backward:
//     per block: the two residual adds handing the float32 stream's gradient to the
//       block's 16-bit branch (rounded: a dtype change no kernel of the add can absorb;
//       2), and per linear the weight gradient to float32 and the output gradient widened
//       for the bias sum (4 linears x 2); head: the wte gradient (1).
//     Total 10 L + 1: a GEMM writing 16-bit where float32 is wanted and the bias sum's
//     widening (both a GEMM epilogue's job: float32 dW output, bias gradient in the
//     epilogue) and the residual gradient's rounding (which a 16-bit residual stream, as
//     llm.c's, removes, at the cost of rounding the stream itself).
//   Without 16-bit activations every product casts its activation operands and widens its
//   results: per linear, x cast and the output widened, then the output gradient cast and
//   dx and dW widened (5); per attention product both operands cast and the result widened,
//   forward and backward (6): 4 x 5 + 2 x 6 per block, the head's linear 5: 32 L + 5.
TEST(AutocastModelStep, GptStepConversionsAreCounted) {
  const int64_t layers = 3;
  nn::GPT gpt({.vocab_size = 64, .context = 16, .n_layer = layers, .n_head = 2, .n_embd = 32, .seed = 7});
  Generator gen(32);
  const Tensor tokens = randint(0, 64, {2, 16}, {.dtype = DType::Int64}, &gen);
  const Tensor targets = randint(0, 64, {2, 16}, {.dtype = DType::Int64}, &gen);
  const Step act = run_step(gpt, tokens, targets, autocast::Options{.activations = true});
  const Step fp32_act = run_step(gpt, tokens, targets, autocast::Options{});
  EXPECT_EQ(act.counters.parameter_casts, 8 * layers + 1);
  EXPECT_EQ(fp32_act.counters.parameter_casts, 8 * layers + 1);
  EXPECT_EQ(act.counters.conversions, 10 * layers + 1);
  EXPECT_EQ(fp32_act.counters.conversions, 32 * layers + 5);
  const Step uncached = run_step(gpt, tokens, targets, autocast::Options{.activations = true, .weight_cache = false});
  EXPECT_EQ(uncached.counters.parameter_casts, 8 * layers + 1) << "each parameter is used once per step here";
  EXPECT_EQ(uncached.loss, act.loss);
}

}  // namespace
}  // namespace strata
