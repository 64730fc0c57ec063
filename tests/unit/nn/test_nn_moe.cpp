// nn::MoE: gradients against finite differences (float64, router included), against a dense
// reference that runs every expert on every token, capacity dropping against a hand count,
// dropless against an unreachable capacity, the auxiliary losses against their formulas,
// idle experts left without a gradient and untouched by AdamW, and bad configurations.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <optional>

#include "gradcheck.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using namespace strata::nn;
using strata::testing::expect_error_mentions;

namespace {

constexpr int64_t kC = 6, kI = 5;

MoEConfig moe_config(int64_t experts = 4, int64_t k = 2) {
  return {.hidden_size = kC, .intermediate_size = kI, .num_experts = experts, .top_k = k};
}

// float64 parameters drawn now from a fixed generator; std 0.5 spreads the router's scores so
// that the top k has no near-ties a finite difference could cross.
std::shared_ptr<MoE> make_moe(const MoEConfig& c, uint64_t seed = 7) {
  Generator gen(seed);
  return std::make_shared<MoE>(
      c, InitOptions{.std = 0.5, .dtype = DType::Float64, .gen = &gen, .linear_init = LinearInit::Normal});
}

Tensor input(int64_t tokens, uint64_t seed) {
  Generator gen(seed);
  return randn({tokens, kC}, {.dtype = DType::Float64}, &gen);
}

// Routes token n to expert route[n] (top-1): the router's weight is 10 x identity on the
// first E features and each token is the one-hot of its expert.
Tensor routed_tokens(MoE& moe, const std::vector<int64_t>& route) {
  NoGradGuard no_grad;
  const int64_t E = moe.config().num_experts;
  Tensor w = zeros({E, kC}, {.dtype = DType::Float64});
  for (int64_t e = 0; e < E; ++e) w.data<double>()[e * kC + e] = 10.0;
  moe.gate->weight.copy_(w);
  Tensor x = zeros({static_cast<int64_t>(route.size()), kC}, {.dtype = DType::Float64});
  for (size_t n = 0; n < route.size(); ++n) x.data<double>()[static_cast<int64_t>(n) * kC + route[n]] = 1.0;
  return x;
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : t.to_vector<double>()) m = std::max(m, std::fabs(v));
  return m;
}

}  // namespace

TEST(MoE, GradientsMatchFiniteDifferencesWithBothLosses) {
  for (MoEGating gating : {MoEGating::Softmax, MoEGating::Sigmoid}) {
    MoEConfig c = moe_config();
    c.gating = gating;
    c.aux_loss_coef = 0.3;
    c.z_loss_coef = 0.2;
    auto moe = make_moe(c);
    std::vector<Tensor> inputs{input(5, 3).set_requires_grad(true)};
    for (auto& [name, p] : moe->named_parameters()) inputs.push_back(p);
    {
      NoGradGuard no_grad;  // every expert takes a token, so every parameter is checked
      moe->forward(inputs[0]);
      for (int64_t n : moe->stats().tokens_per_expert) ASSERT_GT(n, 0);
    }
    // The output and the weighted losses: every parameter, the router's through the gates and
    // both losses.
    auto f = [&](const std::vector<Tensor>& in) {
      Tensor y = moe->forward(in[0]);
      return cat({y.reshape({-1}), moe->auxiliary_loss().view({1})}, 0);
    };
    strata::testing::expect_gradients_match(f, inputs);
  }
}

TEST(MoE, EqualsADenseReferenceOverEveryExpert) {
  auto moe = make_moe(moe_config(4, 2));
  Tensor x = input(7, 5);
  NoGradGuard no_grad;
  Tensor y = moe->forward(x);
  MoERouting r = moe->route(x);
  const std::vector<int64_t> experts = r.experts.to_vector<int64_t>();
  const std::vector<double> gates = r.gates.to_vector<double>();
  Tensor ref = zeros({7, kC}, {.dtype = DType::Float64});
  for (int64_t e = 0; e < 4; ++e) {
    const std::vector<double> all = moe->expert(static_cast<size_t>(e)).forward(x).to_vector<double>();
    for (int64_t n = 0; n < 7; ++n)
      for (int64_t i = 0; i < 2; ++i)
        if (experts[static_cast<size_t>(n * 2 + i)] == e)
          for (int64_t j = 0; j < kC; ++j)
            ref.data<double>()[n * kC + j] +=
                gates[static_cast<size_t>(n * 2 + i)] * all[static_cast<size_t>(n * kC + j)];
  }
  // Both sum the same k = 2 products per entry, the experts' GEMMs over as many rows or one
  // row at a time: a few roundings of the largest magnitude involved (C + I + 4 operations).
  const double bound = (kC + kI + 4) * DBL_EPSILON * max_abs(ref);
  EXPECT_LE(max_abs(sub(y, ref)), bound);
  // Mixtral's gates: softmax over the 4 logits, the top 2 renormalised to sum 1.
  for (int64_t n = 0; n < 7; ++n)
    EXPECT_NEAR(gates[static_cast<size_t>(2 * n)] + gates[static_cast<size_t>(2 * n + 1)], 1.0, 4 * DBL_EPSILON);
}

TEST(MoE, CapacityDropsSlotsInTokenOrderAndCountsThem) {
  MoEConfig c = moe_config(4, 1);
  c.capacity_factor = 1.0;  // ceil(1 * 8 / 4 * 1) = 2 slots per expert
  auto moe = make_moe(c);
  const std::vector<int64_t> route{0, 0, 1, 0, 0, 2, 0, 0};
  Tensor x = routed_tokens(*moe, route);
  NoGradGuard no_grad;
  Tensor y = moe->forward(x);
  const MoEStats& s = moe->stats();
  EXPECT_EQ(s.capacity, std::optional<int64_t>(2));
  EXPECT_EQ(s.tokens_per_expert, (std::vector<int64_t>{6, 1, 1, 0}));
  EXPECT_EQ(s.kept_per_expert, (std::vector<int64_t>{2, 1, 1, 0}));
  EXPECT_EQ(s.dropped, 4);  // tokens 3, 4, 6 and 7: expert 0's slots after its first two
  for (int64_t n = 0; n < 8; ++n) {
    const double out = max_abs(y.narrow(0, n, 1));
    if (n == 3 || n == 4 || n == 6 || n == 7) {
      EXPECT_EQ(out, 0.0) << "token " << n << " was dropped";
    } else {
      EXPECT_GT(out, 0.0) << "token " << n << " was kept";
    }
  }
}

TEST(MoE, EveryTokenToOneExpertIsReportedNotHung) {
  MoEConfig c = moe_config(4, 1);
  c.capacity_factor = 1.25;  // ceil(16 / 4 * 1.25) = 5
  auto moe = make_moe(c);
  Tensor x = routed_tokens(*moe, std::vector<int64_t>(16, 2));
  Tensor y = moe->forward(x);
  EXPECT_EQ(moe->stats().capacity, std::optional<int64_t>(5));
  EXPECT_EQ(moe->stats().dropped, 11);
  EXPECT_EQ(moe->stats().kept_per_expert, (std::vector<int64_t>{0, 0, 5, 0}));
  sum(y).backward();  // and backward runs through the partly dropped routing
  EXPECT_TRUE(moe->expert(2).w1->weight.grad().defined());
}

TEST(MoE, DroplessEqualsAnUnreachableCapacity) {
  auto dropless = make_moe(moe_config(4, 2));
  MoEConfig capped = moe_config(4, 2);
  capped.capacity_factor = 1e6;
  auto unreachable = make_moe(capped);
  Tensor x = input(9, 8);
  NoGradGuard no_grad;
  Tensor a = dropless->forward(x), b = unreachable->forward(x);
  EXPECT_EQ(max_abs(sub(a, b)), 0.0);
  EXPECT_FALSE(dropless->stats().capacity.has_value());
  EXPECT_EQ(unreachable->stats().dropped, 0);
  EXPECT_EQ(dropless->stats().kept_per_expert, dropless->stats().tokens_per_expert);
}

TEST(MoE, AuxiliaryLossesFollowTheirFormulas) {
  MoEConfig c = moe_config(4, 2);
  c.aux_loss_coef = 0.01;
  c.z_loss_coef = 0.001;
  auto moe = make_moe(c);
  Tensor x = input(6, 9);
  NoGradGuard no_grad;
  moe->forward(x);
  const std::vector<double> logits = moe->gate->forward(x).to_vector<double>();
  const std::vector<int64_t> chosen = moe->route(x).experts.to_vector<int64_t>();
  // By hand: P_e the mean softmax probability, f_e the fraction of the 12 slots routed to e.
  std::vector<double> P(4, 0.0), f(4, 0.0);
  double z = 0;
  for (size_t n = 0; n < 6; ++n) {
    double total = 0;
    for (size_t e = 0; e < 4; ++e) total += std::exp(logits[n * 4 + e]);
    for (size_t e = 0; e < 4; ++e) P[e] += std::exp(logits[n * 4 + e]) / total / 6.0;
    z += std::log(total) * std::log(total) / 6.0;
    for (size_t i = 0; i < 2; ++i) f[static_cast<size_t>(chosen[n * 2 + i])] += 1.0 / 12.0;
  }
  double balance = 0;
  for (size_t e = 0; e < 4; ++e) balance += 4.0 * f[e] * P[e];
  // A handful of float64 operations on values of order 1: far below 1e-14 relative.
  EXPECT_NEAR(moe->stats().load_balancing_loss.item(), balance, 64 * DBL_EPSILON * balance);
  EXPECT_NEAR(moe->stats().z_loss.item(), z, 64 * DBL_EPSILON * z);
  EXPECT_NEAR(moe->auxiliary_loss().item(), 0.01 * balance + 0.001 * z, 64 * DBL_EPSILON * balance);
  EXPECT_EQ(moe->stats().tokens_per_expert.size(), 4u);
}

// An expert no token reached is not run: no gradient, so AdamW (with weight decay, which
// would move it even with a zero gradient) leaves it as it was, as PyTorch does.
TEST(MoE, AnIdleExpertGetsNoGradientAndNoStep) {
  auto moe = make_moe(moe_config(4, 1));
  Tensor x = routed_tokens(*moe, {0, 1, 2, 0, 1});  // expert 3 gets nothing
  sum(moe->forward(x)).backward();
  EXPECT_EQ(moe->stats().tokens_per_expert[3], 0);
  std::vector<Tensor> before;
  for (const auto& [name, p] : moe->expert(3).named_parameters()) {
    EXPECT_FALSE(p.grad().defined()) << name;
    before.push_back(p.detach().clone());
  }
  EXPECT_GT(max_abs(moe->expert(0).w2->weight.grad()), 0.0);
  const Tensor busy = moe->expert(0).w2->weight.detach().clone();
  optim::AdamW opt(moe->parameters(), {.lr = 0.1, .weight_decay = 0.1});
  opt.step();
  size_t i = 0;
  for (const auto& [name, p] : moe->expert(3).named_parameters())
    EXPECT_EQ(max_abs(sub(p, before[i++])), 0.0) << name << " moved although idle";
  EXPECT_GT(max_abs(sub(moe->expert(0).w2->weight, busy)), 0.0);
}

TEST(MoE, BadConfigurationsNameTheValueAndTheRule) {
  auto build = [](MoEConfig c) { return [c] { make_moe(c); }; };
  MoEConfig c = moe_config(4, 5);
  expect_error_mentions(build(c), {"top_k 5", "[1, num_experts] = [1, 4]"});
  c = moe_config(4, 0);
  expect_error_mentions(build(c), {"top_k 0"});
  c = moe_config(0, 1);
  expect_error_mentions(build(c), {"num_experts must be at least 1, got 0"});
  for (double factor : {0.0, -1.0}) {
    c = moe_config(4, 2);
    c.capacity_factor = factor;
    expect_error_mentions(build(c), {"capacity_factor must be positive"});
  }
  expect_error_mentions([] { check_moe_config(moe_config(6, 2), 4); },
                        {"expert-parallel degree 4", "divide num_experts 6"});
  expect_error_mentions(
      [] {
        plan_dispatch(from_vector<int64_t>({0, 7}, {2, 1}), 4, std::nullopt);
      },
      {"token 1", "expert 7", "[0, 4)"});
}

namespace {

// The MoE's load-balancing loss and its gradient on the router's weight, for `x`.
std::pair<double, Tensor> balance_loss_and_gradient(MoE& moe, const Tensor& x) {
  moe.gate->weight.set_grad(Tensor());
  moe.forward(x);
  moe.stats().load_balancing_loss.backward();
  return {moe.stats().load_balancing_loss.item(), moe.gate->weight.grad().detach().clone()};
}

}  // namespace

// Without a reducer the loss is exactly the rank-local formula (bit for bit), and the balance
// counts are the rank's own.
TEST(MoE, WithoutARoutingCountReducerTheLossIsTheLocalOne) {
  auto moe = make_moe(moe_config(4, 2));
  Tensor x = input(6, 9);
  NoGradGuard no_grad;
  moe->forward(x);
  const MoEStats& s = moe->stats();
  EXPECT_EQ(s.balance_tokens_per_expert, s.tokens_per_expert);
  EXPECT_EQ(s.balance_tokens, 6);
  const Tensor local = load_balancing_loss(moe->route(x).probs, s.tokens_per_expert, 2);
  EXPECT_EQ(s.load_balancing_loss.item(), local.item());
}

// Two "ranks" of 6 tokens each, their counts summed by the reducer: the mean of their losses
// and of their gradients is the loss and the gradient of one MoE on the 12 tokens (the sum of
// the two halves' probabilities in another order: a few roundings of values of order 1).
TEST(MoE, ARoutingCountReducerGivesTheGlobalBatchLossAndGradient) {
  MoEConfig c = moe_config(4, 2);
  c.aux_loss_coef = 0.01;
  auto moe = make_moe(c);
  const Tensor x = input(12, 9), half[2] = {x.narrow(0, 0, 6), x.narrow(0, 6, 6)};
  const auto [whole, whole_grad] = balance_loss_and_gradient(*moe, x);
  std::vector<int64_t> counts[2];
  for (int r = 0; r < 2; ++r) {
    NoGradGuard no_grad;
    moe->forward(half[r]);
    counts[r] = moe->stats().tokens_per_expert;
    counts[r].push_back(6);
  }
  double mean = 0.0;
  Tensor mean_grad;
  for (int r = 0; r < 2; ++r) {
    moe->set_routing_count_reducer([&counts, r](const std::vector<int64_t>& mine) {
      EXPECT_EQ(mine, counts[r]) << "the reducer gets the expert counts, then the tokens";
      std::vector<int64_t> sum = mine;
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += counts[1 - r][i];
      return sum;
    });
    const auto [loss, grad] = balance_loss_and_gradient(*moe, half[r]);
    EXPECT_EQ(moe->stats().balance_tokens, 12);
    EXPECT_EQ(moe->stats().tokens_per_expert, std::vector<int64_t>(counts[r].begin(), counts[r].end() - 1));
    mean += loss / 2.0;
    mean_grad = mean_grad.defined() ? add(mean_grad, mul(grad, 0.5)) : mul(grad, 0.5);
  }
  EXPECT_TRUE(moe->has_routing_count_reducer());
  EXPECT_NEAR(mean, whole, 64 * DBL_EPSILON * whole);
  EXPECT_LE(max_abs(sub(mean_grad, whole_grad)), 64 * DBL_EPSILON * max_abs(whole_grad));
  // The two ranks route differently: each rank's own counts would give another loss.
  moe->set_routing_count_reducer({});
  double per_rank = 0.0;
  for (const Tensor& h : half) per_rank += balance_loss_and_gradient(*moe, h).first / 2.0;
  EXPECT_GT(std::abs(per_rank - whole), 1e6 * DBL_EPSILON * whole);
}

TEST(MoE, ABadRoutingCountReducerIsNamed) {
  MoEConfig config = moe_config(4, 2);
  config.aux_loss_coef = 0.01;  // the reducer runs only when there is a load-balancing loss
  auto moe = make_moe(config);
  const Tensor x = input(6, 9);
  moe->set_routing_count_reducer(
      [](const std::vector<int64_t>& c) { return std::vector<int64_t>(c.begin(), c.end() - 1); });
  expect_error_mentions([&] { moe->forward(x); }, {"routing-count reducer returned 4 counts for 5"});
  moe->set_routing_count_reducer([](const std::vector<int64_t>& c) { return std::vector<int64_t>(c.size(), 0); });
  expect_error_mentions([&] { moe->forward(x); }, {"below this rank's own", "sum the counts over the ranks"});
  expect_error_mentions(
      [&] {
        load_balancing_loss(moe->route(x).probs, {1, 2, 3, 4}, 2, 0);
      },
      {"routed_tokens must be at least 1, got 0"});
  // Without a load-balancing loss the reducer is not called (no collective to issue).
  MoEConfig plain = moe_config(4, 2);
  auto quiet = make_moe(plain);
  int calls = 0;
  quiet->set_routing_count_reducer([&calls](const std::vector<int64_t>& c) {
    ++calls;
    return c;
  });
  quiet->forward(x);
  EXPECT_EQ(calls, 0);
}

namespace {

// Forward and backward of a MoE built from `c` at `seed` on x; returns the output, then the
// input's gradient, then every parameter's gradient in name order (undefined where none).
std::vector<Tensor> forward_backward(const MoEConfig& c, DType dtype, const Tensor& x0) {
  Generator gen(7);
  MoE moe(c, InitOptions{.std = 0.5, .dtype = dtype, .gen = &gen, .linear_init = LinearInit::Normal});
  Tensor x = x0.to(dtype).set_requires_grad(true);
  const Tensor y = moe.forward(x);
  sum(mul(y, y)).backward();
  std::vector<Tensor> out{y.detach(), x.grad()};
  for (const auto& [name, p] : moe.named_parameters()) out.push_back(p.grad());
  return out;
}

}  // namespace

// The grouped path (one grouped_linear per layer) against each expert's own forward: on the
// CPU both run the same GEMM calls on the same rows, so every bit agrees, idle experts and
// dropped tokens included.
TEST(MoE, GroupedExpertsEqualOneExpertAfterAnother) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (std::optional<double> capacity : {std::optional<double>(), std::optional<double>(0.6)}) {
      MoEConfig grouped = moe_config(4, 2);
      grouped.capacity_factor = capacity;
      MoEConfig looped = grouped;
      looped.grouped_experts = false;
      const Tensor x = input(9, 3);
      const std::vector<Tensor> a = forward_backward(grouped, dtype, x), b = forward_backward(looped, dtype, x);
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_EQ(a[i].defined(), b[i].defined()) << "tensor " << i;
        if (!a[i].defined()) continue;
        EXPECT_TRUE(strata::testing::same_bits(a[i], b[i]))
            << "tensor " << i << " (0: output, 1: input gradient, then parameters) dtype " << dtype;
      }
    }
  }
}

TEST(MoE, AnExpertWithHooksRunsThroughItsOwnForward) {
  auto moe = make_moe(moe_config(4, 2));
  EXPECT_TRUE(moe->runs_grouped());
  int calls = 0;
  moe->expert(2).w1->register_forward_pre_hook([&calls](Module&) { ++calls; });
  EXPECT_FALSE(moe->runs_grouped());
  (void)moe->forward(input(12, 5));
  ASSERT_GT(moe->stats().kept_per_expert[2], 0);
  EXPECT_EQ(calls, 1);
  MoEConfig off = moe_config(4, 2);
  off.grouped_experts = false;
  EXPECT_FALSE(make_moe(off)->runs_grouped());
}
