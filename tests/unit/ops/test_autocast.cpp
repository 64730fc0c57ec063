// autocast::Scope (strata/ops/autocast.h): products of float32 tensors round their
// operands and result to bfloat16/float16 (float32 accumulation), forward and backward,
// and nothing else changes; a GPT trains under bf16 autocast, and under fp16 autocast with
// loss scaling, close to float32 training.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "strata/strata.h"
#include "test_util.h"

namespace strata {
namespace {

bool representable(const Tensor& t, DType dtype) { return max_abs_diff(t, t.to(dtype).to(DType::Float32)) == 0.0; }

// |got - want| within one ulp of `dtype` at want's magnitude, elementwise.
void expect_within_one_ulp(const Tensor& got, const Tensor& want, DType dtype, const char* what) {
  const double eps = dtype == DType::BFloat16 ? std::ldexp(1.0, -7) : std::ldexp(1.0, -10);
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  ASSERT_EQ(g.size(), w.size());
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_LE(std::abs(g[i] - w[i]), eps * std::abs(w[i]) + 1e-30) << what << " element " << i;
}

TEST(Autocast, ScopesNestAndRestore) {
  EXPECT_FALSE(autocast::active());
  {
    autocast::Scope bf16;
    EXPECT_EQ(autocast::active(), DType::BFloat16);
    {
      autocast::Scope fp16(DType::Float16);
      EXPECT_EQ(autocast::active(), DType::Float16);
      autocast::Scope off(DType::BFloat16, /*enabled=*/false);
      EXPECT_EQ(autocast::active(), DType::Float16);
    }
    EXPECT_EQ(autocast::active(), DType::BFloat16);
  }
  EXPECT_FALSE(autocast::active());
  strata::testing::expect_error_mentions([] { autocast::Scope s(DType::Float64); }, {"autocast", "float64"});
}

TEST(Autocast, ProductsRoundOperandsAndResult) {
  Generator gen(3);
  for (DType dtype : {DType::BFloat16, DType::Float16}) {
    const Tensor a = randn({5, 37}, {}, &gen), b = randn({37, 11}, {}, &gen);
    Tensor out;
    {
      autocast::Scope scope(dtype);
      out = matmul(a, b);
    }
    EXPECT_EQ(out.dtype(), DType::Float32);
    EXPECT_TRUE(representable(out, dtype));
    // The same product of the rounded operands in float64, rounded once.
    const Tensor ref = matmul(a.to(dtype).to(DType::Float64), b.to(dtype).to(DType::Float64)).to(DType::Float32);
    expect_within_one_ulp(out, ref, dtype, "matmul");
    EXPECT_GT(max_abs_diff(out, matmul(a, b)), 0.0) << "autocast changed nothing";
    // Outside the scope: float32 again.
    EXPECT_FALSE(representable(matmul(a, b), dtype));
  }
}

TEST(Autocast, LinearBackwardKeepsTheScopeOfItsForward) {
  Generator gen(4);
  Tensor x = randn({6, 13}, {}, &gen).set_requires_grad(true);
  nn::Linear lin(13, 7);
  const Tensor g = randn({6, 7}, {}, &gen);
  Tensor y;
  {
    autocast::Scope bf16;
    y = lin.forward(x);
  }
  EXPECT_TRUE(representable(y, DType::BFloat16));
  y.backward(g);  // outside the scope: the products recorded under it still round
  EXPECT_TRUE(representable(x.grad(), DType::BFloat16));
  EXPECT_TRUE(representable(lin.weight.grad(), DType::BFloat16));
  const Tensor gw_ref = matmul(g.to(DType::BFloat16).to(DType::Float64).transpose(0, 1),
                               x.detach().to(DType::BFloat16).to(DType::Float64))
                            .to(DType::Float32);
  expect_within_one_ulp(lin.weight.grad(), gw_ref, DType::BFloat16, "linear dweight");
  // Elementwise ops stay float32 under the scope.
  autocast::Scope bf16;
  EXPECT_FALSE(representable(exp(mul(x.detach(), 0.37)), DType::BFloat16));
}

// A tiny GPT on the synthetic task: float32, bf16 autocast and fp16 autocast with a
// GradScaler all learn, and the mixed-precision losses stay near float32's.
double train_tiny_gpt(std::optional<DType> autocast_dtype, int steps) {
  nn::GPT model({.vocab_size = 32, .context = 16, .n_layer = 2, .n_head = 2, .n_embd = 32, .seed = 5});
  optim::AdamW opt(model.parameters(), {.lr = 3e-3, .weight_decay = 0.0});
  optim::GradScaler scaler({.init_scale = 1024.0, .enabled = autocast_dtype == DType::Float16});
  Generator gen(9);
  // A learnable sequence: each token is the previous plus one (mod 32).
  double loss_value = 0;
  for (int s = 0; s < steps; ++s) {
    const std::vector<int64_t> start = randint(0, 32, {8}, {.dtype = DType::Int64}, &gen).to_vector<int64_t>();
    std::vector<int64_t> seq;
    for (int64_t b = 0; b < 8; ++b)
      for (int64_t t = 0; t < 17; ++t) seq.push_back((start[static_cast<size_t>(b)] + t) % 32);
    const Tensor all = from_vector(seq, {8, 17});
    const Tensor tokens = all.narrow(1, 0, 16).contiguous(), targets = all.narrow(1, 1, 16).contiguous();
    Tensor loss;
    {
      autocast::Scope scope(autocast_dtype.value_or(DType::BFloat16), autocast_dtype.has_value());
      loss = model.loss(tokens, targets);
    }
    scaler.scale(loss).backward();
    scaler.step(opt);
    scaler.update();
    opt.zero_grad();
    loss_value = loss.item();
  }
  return loss_value;
}

TEST(Autocast, TinyGptTrainsUnderBf16AndFp16AutocastLikeFloat32) {
  const double f32 = train_tiny_gpt(std::nullopt, 60);
  const double bf16 = train_tiny_gpt(DType::BFloat16, 60);
  const double fp16 = train_tiny_gpt(DType::Float16, 60);
  // log(32) = 3.47 at the start; float32 reaches well below 1 on this task.
  EXPECT_LT(f32, 1.0);
  // Measured: 0.29276 (float32), 0.29290 (bf16), 0.29271 (fp16).
  EXPECT_LT(std::abs(bf16 - f32), 0.02) << "bf16 " << bf16 << " vs float32 " << f32;
  EXPECT_LT(std::abs(fp16 - f32), 0.01) << "fp16 " << fp16 << " vs float32 " << f32;
  EXPECT_NE(bf16, f32);
  // The model's products did run under the scope: its logits (the last linear) are bf16 values.
  nn::GPT model({.vocab_size = 32, .context = 16, .n_layer = 2, .n_head = 2, .n_embd = 32, .seed = 5});
  const Tensor tokens = randint(0, 32, {2, 16}, {.dtype = DType::Int64});
  autocast::Scope bf16_scope;
  EXPECT_TRUE(representable(model.forward(tokens), DType::BFloat16));
}

}  // namespace
}  // namespace strata
