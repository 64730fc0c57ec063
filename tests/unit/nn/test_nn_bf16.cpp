// bfloat16 parameters in nn/GPT: stored (with their gradients) in bf16, computed with in
// float32 by ops that keep no float32 copy until backward; and the autograd accumulation of
// 16-bit gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <iomanip>
#include <iostream>
#include <string>

#include "strata/nn/gpt.h"
#include "strata/strata.h"

using namespace strata;
using namespace strata::parallel;
using namespace strata::nn;

namespace {

GPTConfig config_with(std::optional<DType> param_dtype) {
  return GPTConfig{.vocab_size = 13,
                   .context = 8,
                   .n_layer = 2,
                   .n_head = 2,
                   .n_embd = 16,
                   .dropout = 0.0,
                   .seed = 11,
                   .dtype = DType::Float32,
                   .param_dtype = param_dtype};
}

struct Data {
  Tensor tokens, targets;
};
Data data_for(const GPTConfig& c) {
  Generator g(3);
  return {randint(0, c.vocab_size, {3, c.context}, {.dtype = DType::Int64}, &g),
          randint(0, c.vocab_size, {3, c.context}, {.dtype = DType::Int64}, &g)};
}

// A float32 GPT whose weights are the bf16 model's, exactly (bf16 -> f32 is exact).
void load_rounded(GPT& fp32, const GPT& bf16) {
  StateDict state;
  for (auto& [name, p] : bf16.named_parameters()) state[name] = p.detach().to(DType::Float32);
  fp32.load_state_dict(state);
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  auto x = a.to_vector<double>();
  auto y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i)
    if (!(x[i] == y[i])) return false;
  return true;
}

double relative_l2(const Tensor& a, const Tensor& b) {
  auto x = a.to_vector<double>();
  auto y = b.to_vector<double>();
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += (x[i] - y[i]) * (x[i] - y[i]);
    den += y[i] * y[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace

TEST(Bf16GPT, ParametersAreTheFloat32InitialisationRounded) {
  GPT fp32(config_with(std::nullopt));
  GPT bf16(config_with(DType::BFloat16));
  auto a = fp32.named_parameters();
  auto b = bf16.named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(b[i].second.dtype(), DType::BFloat16) << b[i].first;
    EXPECT_TRUE(b[i].second.requires_grad()) << b[i].first;
    EXPECT_TRUE(bitwise_equal(b[i].second, a[i].second.detach().to(DType::BFloat16))) << b[i].first;
  }
  EXPECT_EQ(bf16.num_parameters(), fp32.num_parameters());
}

// The bf16 model computes in float32 on its weights converted exactly, so its loss is the
// float32 model's on the rounded weights: same ops on the same values, hence bitwise (the
// stated tolerance is 0). Against the unrounded float32 model it differs by the rounding.
TEST(Bf16GPT, LossEqualsTheFloat32ModelOnRoundedWeights) {
  GPT bf16(config_with(DType::BFloat16));
  GPT rounded(config_with(std::nullopt));
  load_rounded(rounded, bf16);
  GPT unrounded(config_with(std::nullopt));
  Data d = data_for(bf16.config());
  Tensor lb = bf16.loss(d.tokens, d.targets);
  Tensor lr = rounded.loss(d.tokens, d.targets);
  Tensor lu = unrounded.loss(d.tokens, d.targets);
  EXPECT_EQ(lb.dtype(), DType::Float32);
  EXPECT_EQ(lb.item(), lr.item());
  EXPECT_NE(lb.item(), lu.item());  // the weights did change by rounding
  EXPECT_NEAR(lb.item(), lu.item(), 1e-2 * std::abs(lu.item()));
  // Logits are float32 too, and evaluation without autograd works.
  NoGradGuard no_grad;
  EXPECT_EQ(bf16.forward(d.tokens).dtype(), DType::Float32);
}

// Each gradient reaches its bf16 parameter in bf16: the float32 gradient of the rounded-weight
// model, rounded once. wte (embedding + tied head) sums two bf16 contributions, one more
// rounding: within 2^-8 relative.
TEST(Bf16GPT, GradientsReachBf16ParametersInBf16) {
  GPT bf16(config_with(DType::BFloat16));
  GPT rounded(config_with(std::nullopt));
  load_rounded(rounded, bf16);
  Data d = data_for(bf16.config());
  bf16.loss(d.tokens, d.targets).backward();
  rounded.loss(d.tokens, d.targets).backward();
  auto a = bf16.named_parameters();
  auto b = rounded.named_parameters();
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string& name = a[i].first;
    const Tensor& g = a[i].second.grad();
    ASSERT_TRUE(g.defined()) << name;
    EXPECT_EQ(g.dtype(), DType::BFloat16) << name;
    EXPECT_EQ(g.shape(), a[i].second.shape()) << name;
    const Tensor expected = b[i].second.grad().to(DType::BFloat16);
    if (name == "wte.weight") {
      EXPECT_LE(relative_l2(g, b[i].second.grad()), std::ldexp(1.0, -8)) << name;
    } else {
      EXPECT_TRUE(bitwise_equal(g, expected)) << name;
    }
  }
}

TEST(Bf16GPT, Float16ParametersWorkTheSameWay) {
  GPT f16(config_with(DType::Float16));
  Data d = data_for(f16.config());
  f16.loss(d.tokens, d.targets).backward();
  for (auto& [name, p] : f16.named_parameters()) {
    EXPECT_EQ(p.dtype(), DType::Float16) << name;
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_EQ(p.grad().dtype(), DType::Float16) << name;
  }
}

TEST(Bf16GPT, StateDictRoundTripsInBf16) {
  GPT a(config_with(DType::BFloat16));
  GPTConfig other = config_with(DType::BFloat16);
  other.seed = 12;
  GPT b(other);
  b.load_state_dict(a.state_dict());
  for (auto& [name, t] : b.state_dict()) EXPECT_TRUE(bitwise_equal(t, a.state_dict().at(name))) << name;
  // A float32 state dict does not fit a bf16 model (dtypes must match).
  GPT fp32(config_with(std::nullopt));
  EXPECT_THROW(b.load_state_dict(fp32.state_dict()), Error);
}

TEST(Bf16GPT, RejectsUnsupportedDtypeCombinations) {
  GPTConfig c = config_with(DType::BFloat16);
  c.dtype = DType::Float64;
  try {
    GPT g(c);
    FAIL() << "bf16 parameters with float64 activations were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("param_dtype"), std::string::npos) << e.what();
  }
  GPTConfig i = config_with(std::nullopt);
  i.param_dtype = DType::Int32;
  EXPECT_THROW(GPT{i}, Error);
  GPTConfig h = config_with(std::nullopt);
  h.dtype = DType::BFloat16;  // compute dtype must be float32/float64
  EXPECT_THROW(GPT{h}, Error);
}

// Optimizers update float32/float64 parameters only; the error points to the supported path.
TEST(Bf16GPT, OptimizersRefuseBf16ParametersNamingZero) {
  GPT bf16(config_with(DType::BFloat16));
  try {
    optim::AdamW opt(bf16.parameters(), {});
    FAIL() << "AdamW accepted bf16 parameters";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("bfloat16"), std::string::npos) << msg;
    EXPECT_NE(msg.find("ZeroOptimizer"), std::string::npos) << msg;
  }
}

// A bf16 leaf cast to float32 at use: gradients accumulate across backward passes (AccumulateGrad)
// and across uses in one pass (the engine's sum), in float32 rounded once to bf16 per addition.
TEST(Bf16Accumulate, ExactForRepresentableSums) {
  Tensor p = zeros({4}, {.dtype = DType::BFloat16});
  p.set_requires_grad(true);
  Tensor c = from_vector(std::vector<float>{1.5f, -0.25f, 3.0f, 0.125f}, {4});
  auto use = [&] { return sum(mul(p.to(DType::Float32), c)); };
  use().backward();
  ASSERT_EQ(p.grad().dtype(), DType::BFloat16);
  EXPECT_EQ(p.grad().to_vector<float>(), (std::vector<float>{1.5f, -0.25f, 3.0f, 0.125f}));
  use().backward();  // AccumulateGrad adds into the existing bf16 gradient
  EXPECT_EQ(p.grad().to_vector<float>(), (std::vector<float>{3.0f, -0.5f, 6.0f, 0.25f}));
  use().backward();
  EXPECT_EQ(p.grad().to_vector<float>(), (std::vector<float>{4.5f, -0.75f, 9.0f, 0.375f}));
  EXPECT_EQ(p.grad().dtype(), DType::BFloat16);

  // Two uses in one graph: the engine sums the two bf16 gradients before AccumulateGrad.
  Tensor q = zeros({4}, {.dtype = DType::BFloat16});
  q.set_requires_grad(true);
  Tensor d = from_vector(std::vector<float>{0.5f, 0.75f, -3.0f, 0.375f}, {4});
  add(sum(mul(q.to(DType::Float32), c)), sum(mul(q.to(DType::Float32), d))).backward();
  EXPECT_EQ(q.grad().dtype(), DType::BFloat16);
  EXPECT_EQ(q.grad().to_vector<float>(), (std::vector<float>{2.0f, 0.5f, 0.0f, 0.5f}));
}

// A sum that bf16 cannot hold rounds to the nearest value (ties to even), once.
TEST(Bf16Accumulate, RoundsTheFloat32SumOnce) {
  Tensor p = zeros({3}, {.dtype = DType::BFloat16});
  p.set_requires_grad(true);
  const float u = std::ldexp(1.0f, -8);  // half a bf16 ulp at 1
  auto use = [&](std::vector<float> w) { sum(mul(p.to(DType::Float32), from_vector(w, {3}))).backward(); };
  use({1.0f, 1.0f, 1.0f});
  use({u, 1.25f * u, 0.75f * u});  // each representable in bf16
  // 1 + u is a tie -> even (1); 1 + 1.25u rounds up to 1 + 2u; 1 + 0.75u rounds down.
  EXPECT_EQ(p.grad().to_vector<float>(), (std::vector<float>{1.0f, 1.0f + 2 * u, 1.0f}));
}

TEST(Bf16Accumulate, MismatchedGradientDtypeIsAClearError) {
  Tensor p = zeros({2}, {.dtype = DType::BFloat16});
  p.set_requires_grad(true);
  p.set_grad(zeros({2}, {.dtype = DType::BFloat16}));
  // A float32 gradient arriving at a bf16 leaf (not through .to()) cannot be mixed in.
  Tensor g = ones({2});
  EXPECT_THROW(p.backward(g), Error);
}

// --- 16-bit parameters used by the ops directly: the float32 copy is a transient ---
// linear, embedding and layer_norm take a 16-bit weight/bias with float32 compute, convert
// it for the forward only and again in backward. The reference is the unfused path,
// op(x, param.to(Float32)) (nn::compute_param), whose float32 copy autograd keeps until
// backward: values and gradients must be the same bits.

namespace {

Tensor param16(const Shape& shape, DType dtype, uint64_t seed) {
  Generator g(seed);
  return randn(shape, {}, &g).to(dtype).set_requires_grad(true);
}

Tensor input32(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return randn(shape, {}, &g).set_requires_grad(true);
}

// Runs f on fresh leaves made by `make` twice, once with the 16-bit parameters as they are
// and once through compute_param, and compares the outputs and every gradient bitwise.
void expect_fused_equals_cast(const std::function<std::vector<Tensor>()>& make,
                              const std::function<Tensor(const std::vector<Tensor>&)>& f) {
  std::vector<Tensor> a = make(), b = make();
  std::vector<Tensor> b_cast;
  for (const Tensor& t : b) b_cast.push_back(compute_param(t));
  Tensor ya = f(a), yb = f(b_cast);
  ASSERT_EQ(ya.dtype(), DType::Float32);
  EXPECT_TRUE(bitwise_equal(ya, yb));
  Generator g(99);
  Tensor w = randn(ya.shape(), {}, &g);
  sum(mul(ya, w)).backward();
  sum(mul(yb, w)).backward();
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].defined() || !a[i].requires_grad()) continue;
    ASSERT_TRUE(a[i].grad().defined()) << "input " << i;
    EXPECT_EQ(a[i].grad().dtype(), a[i].dtype()) << "input " << i;
    EXPECT_TRUE(bitwise_equal(a[i].grad(), b[i].grad())) << "input " << i;
  }
}

}  // namespace

TEST(Bf16Ops, LinearWith16BitParametersEqualsTheCastPath) {
  for (DType dt : {DType::BFloat16, DType::Float16}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    auto with_bias = [&] {
      return std::vector<Tensor>{input32({2, 5, 7}, 1), param16({6, 7}, dt, 2), param16({6}, dt, 3)};
    };
    expect_fused_equals_cast(with_bias, [](const std::vector<Tensor>& t) { return linear(t[0], t[1], t[2]); });
    auto no_bias = [&] { return std::vector<Tensor>{input32({7}, 4), param16({6, 7}, dt, 5)}; };  // vector input
    expect_fused_equals_cast(no_bias, [](const std::vector<Tensor>& t) { return linear(t[0], t[1]); });
    // A float32 bias with a 16-bit weight (and the reverse) mix freely.
    auto mixed = [&] { return std::vector<Tensor>{input32({3, 7}, 6), param16({6, 7}, dt, 7), input32({6}, 8)}; };
    expect_fused_equals_cast(mixed, [](const std::vector<Tensor>& t) { return linear(t[0], t[1], t[2]); });
  }
}

TEST(Bf16Ops, EmbeddingAndLayerNormWith16BitParametersEqualTheCastPath) {
  for (DType dt : {DType::BFloat16, DType::Float16}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    const Tensor idx = from_vector<int64_t>({3, 0, 3, 9, 1, 3}, {2, 3});
    expect_fused_equals_cast(
        [&] {
          return std::vector<Tensor>{param16({10, 4}, dt, 9)};
        },
        [&](const std::vector<Tensor>& t) { return embedding(idx, t[0]); });
    auto ln = [&] { return std::vector<Tensor>{input32({3, 4, 8}, 10), param16({8}, dt, 11), param16({8}, dt, 12)}; };
    expect_fused_equals_cast(ln, [](const std::vector<Tensor>& t) { return layer_norm(t[0], t[1], t[2], 1e-5); });
    auto ln_weight_only = [&] { return std::vector<Tensor>{input32({5, 8}, 13), param16({8}, dt, 14)}; };
    expect_fused_equals_cast(ln_weight_only,
                             [](const std::vector<Tensor>& t) { return layer_norm(t[0], t[1], Tensor(), 1e-5); });
  }
}

TEST(Bf16Ops, SixteenBitParametersNeedFloat32Compute) {
  Tensor x64 = ones({2, 4}, {.dtype = DType::Float64});
  Tensor w16 = ones({3, 4}, {.dtype = DType::BFloat16});
  try {
    linear(x64, w16);
    FAIL() << "a bf16 weight with a float64 input was accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("linear: weight has dtype bfloat16"), std::string::npos) << msg;
  }
  EXPECT_THROW(layer_norm(x64, ones({4}, {.dtype = DType::Float16}), {}), Error);
  EXPECT_THROW(linear(ones({2, 4}, {.dtype = DType::BFloat16}), w16), Error);  // the input itself stays float
  EXPECT_THROW(embedding(from_vector<int64_t>({0}, {1}), ones({3, 4}, {.dtype = DType::Int32})), Error);
}

namespace {

// GPT::forward spelled out with every parameter cast through compute_param: the unfused path
// (before the ops took 16-bit parameters), whose float32 copies autograd keeps until backward.
Tensor reference_loss(GPT& m, const Tensor& tokens, const Tensor& targets) {
  auto lin = [](Linear& l, const Tensor& x) { return linear(x, compute_param(l.weight), compute_param(l.bias)); };
  auto ln = [](LayerNorm& l, const Tensor& x) {
    return layer_norm(x, compute_param(l.weight), compute_param(l.bias), l.eps);
  };
  const int64_t B = tokens.size(0), T = tokens.size(1), C = m.config().n_embd;
  Tensor x =
      add(embedding(tokens, compute_param(m.wte->weight)), embedding(arange(0, T), compute_param(m.wpe->weight)));
  for (size_t i = 0; i < m.h->size(); ++i) {
    Block& blk = m.block(i);
    const int64_t H = blk.attn->n_head, D = C / H;
    std::vector<Tensor> qkv = split(lin(*blk.attn->c_attn, ln(*blk.ln_1, x)).view({B, T, 3, H, D}), 1, 2);
    auto heads = [](const Tensor& t) { return t.squeeze(2).transpose(1, 2); };
    Tensor y = causal_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2])).transpose(1, 2).reshape({B, T, C});
    x = add(x, lin(*blk.attn->c_proj, y));
    x = add(x, lin(*blk.mlp->c_proj, gelu(lin(*blk.mlp->c_fc, ln(*blk.ln_2, x)))));
  }
  Tensor logits = linear(ln(*m.ln_f, x), compute_param(m.wte->weight));
  const int64_t N = tokens.numel();
  return cross_entropy(logits.view({N, m.config().vocab_size}), targets.reshape({N}));
}

GPTConfig wider(DType param_dtype) {
  return GPTConfig{.vocab_size = 64,
                   .context = 16,
                   .n_layer = 2,
                   .n_head = 4,
                   .n_embd = 64,
                   .dropout = 0.0,
                   .seed = 5,
                   .dtype = DType::Float32,
                   .param_dtype = param_dtype};
}

}  // namespace

// The loss and every gradient (wte's two contributions included) are the bits of the unfused path.
TEST(Bf16GPT, LossAndEveryGradientEqualTheUnfusedCastPathBitwise) {
  for (DType dt : {DType::BFloat16, DType::Float16}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    GPT fused(wider(dt));
    GPT unfused(wider(dt));
    Data d = data_for(fused.config());
    Tensor lf = fused.loss(d.tokens, d.targets);
    Tensor lu = reference_loss(unfused, d.tokens, d.targets);
    EXPECT_EQ(lf.item(), lu.item());
    lf.backward();
    lu.backward();
    auto a = fused.named_parameters();
    auto b = unfused.named_parameters();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_TRUE(a[i].second.grad().defined()) << a[i].first;
      EXPECT_EQ(a[i].second.grad().dtype(), dt) << a[i].first;
      EXPECT_TRUE(bitwise_equal(a[i].second.grad(), b[i].second.grad())) << a[i].first;
    }
  }
}

// What stays allocated between forward and backward: the unfused path also holds a float32
// copy of every parameter a backward reads (the 2-D weights, wte for the tied head, the
// LayerNorm weights), 4 bytes each; the fused path holds none of them.
TEST(Bf16GPT, ForwardKeepsNoFloat32CopyOfTheParameters) {
  GPT fused(wider(DType::BFloat16));
  GPT unfused(wider(DType::BFloat16));
  Data d = data_for(fused.config());
  auto growth = [&](const std::function<Tensor()>& forward) {
    const size_t before = cpu_allocator::stats().in_use_bytes;
    Tensor loss = forward();  // the graph (and what it saved) lives as long as loss
    const size_t after = cpu_allocator::stats().in_use_bytes;
    loss.backward();
    return after - before;
  };
  const size_t g_fused = growth([&] { return fused.loss(d.tokens, d.targets); });
  const size_t g_unfused = growth([&] { return reference_loss(unfused, d.tokens, d.targets); });
  int64_t read_by_backward = 0;  // parameters whose value a backward needs
  for (auto& [name, p] : fused.named_parameters())
    if (p.dim() == 2 ? name != "wpe.weight" : (name.find("ln_") != std::string::npos && name.ends_with(".weight")))
      read_by_backward += p.numel();
  const int64_t psi = fused.num_parameters();
  std::cout << "[ bf16 GPT, " << psi << " parameters ] in use after forward: fused " << g_fused << " B, unfused "
            << g_unfused << " B, difference " << (g_unfused - g_fused) << " B = " << std::fixed << std::setprecision(3)
            << static_cast<double>(g_unfused - g_fused) / static_cast<double>(psi) << " B/parameter\n";
  ASSERT_GT(g_unfused, g_fused);
  EXPECT_GE(g_unfused - g_fused, static_cast<size_t>(4 * read_by_backward));
  EXPECT_GE(static_cast<double>(g_unfused - g_fused), 0.95 * 4.0 * static_cast<double>(psi));
}

// ZeRO-3 frees a unit's gathered parameters after its forward and gathers them into fresh
// memory before its backward: backward must read the parameters then (not a copy made in
// forward), and with the same values produce the same gradients.
TEST(Bf16GPT, BackwardReadsTheParametersAgainAfterTheirStorageIsReallocated) {
  GPT plain(config_with(DType::BFloat16));
  GPT zero(config_with(DType::BFloat16));
  Data d = data_for(plain.config());
  plain.loss(d.tokens, d.targets).backward();

  std::vector<std::pair<Tensor, Tensor>> saved;  // parameter, its values
  for (Tensor& p : zero.parameters()) saved.emplace_back(p, p.detach().clone());
  Tensor loss = zero.loss(d.tokens, d.targets);
  for (auto& [p, v] : saved) p.storage()->release();
  // Refilled as ZeRO-3's all-gather does, through the pointer: restoring the same values is no
  // in-place change (copy_ would count one, and backward would rightly refuse the graph).
  for (auto& [p, v] : saved) {
    p.storage()->reallocate();
    std::memcpy(p.data_ptr(), v.data_ptr(), p.nbytes());
  }
  // Fresh memory holding the same values: the gradients are the plain run's, bit for bit.
  loss.backward();
  auto a = zero.named_parameters();
  auto b = plain.named_parameters();
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(bitwise_equal(a[i].second.grad(), b[i].second.grad())) << a[i].first;
}

TEST(Bf16GPT, BackwardAfterReleaseWithoutGatherIsAnError) {
  GPT m(config_with(DType::BFloat16));
  Data d = data_for(m.config());
  Tensor loss = m.loss(d.tokens, d.targets);
  for (Tensor& p : m.parameters()) p.storage()->release();
  try {
    loss.backward();
    FAIL() << "backward read no parameter: a float32 copy from forward must have been used";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("released"), std::string::npos) << e.what();
  }
}
