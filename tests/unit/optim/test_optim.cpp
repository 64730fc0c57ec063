// Optimizers, schedules, gradient clipping and optimizer state. Reference values come from
// PyTorch 1.13 (tests/reference/optim_reference.py prints every one of them).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <set>
#include <string>
#include <utility>

#include "strata/strata.h"
#include "strata_kernels/common/adam.h"
#include "strata_kernels/common/sgd.h"

using namespace strata;
using namespace strata::optim;

namespace {

// The fixed inputs of optim_reference.py: p0 of shape [2, 3], p1 of shape [3].
const std::vector<double> kP0 = {0.1, -0.2, 0.3, -0.4, 0.5, -0.6};
const std::vector<double> kP1 = {0.05, -0.15, 0.25};

// Gradient of element i of parameter `param` at step `step`: a small integer times 0.037,
// computed the same way (and so bit for bit the same) as in the Python script.
double grad_value(int param, int64_t i, int step) {
  return static_cast<double>((i * 7 + step * 3 + param * 5) % 11 - 5) * 0.037;
}

std::vector<Tensor> make_params(DType dtype = DType::Float64) {
  Tensor p0 = from_vector(kP0, {2, 3}).to(dtype);
  Tensor p1 = from_vector(kP1, {3}).to(dtype);
  p0.set_requires_grad(true);
  p1.set_requires_grad(true);
  return {p0, p1};
}

// Sets the gradients of step `step`; parameters (j, step) listed in `skip` get none.
void set_grads(const std::vector<Tensor>& params, int step, const std::set<std::pair<int, int>>& skip = {}) {
  for (size_t j = 0; j < params.size(); ++j) {
    Tensor p = params[j];
    if (skip.count({static_cast<int>(j), step}) != 0) {
      p.set_grad(Tensor());
      continue;
    }
    std::vector<double> g(static_cast<size_t>(p.numel()));
    for (size_t i = 0; i < g.size(); ++i) g[i] = grad_value(static_cast<int>(j), static_cast<int64_t>(i), step);
    p.set_grad(from_vector(g, p.shape()).to(p.dtype()));
  }
}

void run_steps(Optimizer& opt, const std::vector<Tensor>& params, int first, int count,
               const std::set<std::pair<int, int>>& skip = {}) {
  for (int k = first; k < first + count; ++k) {
    set_grads(params, k, skip);
    opt.step();
  }
}

std::vector<double> flat_values(const std::vector<Tensor>& tensors) {
  std::vector<double> out;
  for (const Tensor& t : tensors) {
    std::vector<double> v = t.to_vector<double>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

void expect_near_rel(const std::vector<double>& actual, const std::vector<double>& expected, double rel) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i], rel * std::fabs(expected[i]) + 1e-300) << "element " << i;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.raw_data(), cb.raw_data(), ca.nbytes()) == 0;
}

void expect_state_bitwise_equal(const StateDict& a, const StateDict& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [key, value] : a) {
    ASSERT_EQ(b.count(key), 1u) << key;
    EXPECT_TRUE(bitwise_equal(value, b.at(key))) << key;
  }
}

// Runs f, expects a strata::Error whose message contains every one of `parts`.
void expect_error_naming(const std::function<void()>& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const std::string& part : parts) EXPECT_NE(what.find(part), std::string::npos) << what;
  }
}

constexpr double kRel = 1e-12;

}  // namespace

// --- SGD ---

TEST(OptimSGD, PlainMatchesTorch) {
  auto params = make_params();
  SGD opt(params, {.lr = 0.1});
  run_steps(opt, params, 0, 3);
  // torch.optim.SGD(ps, lr=0.1), 3 steps
  expect_near_rel(flat_values(params),
                  {0.12220000000000002, -0.2148, 0.28890000000000005, -0.40740000000000004, 0.4963, -0.6,
                   0.05740000000000001, -0.13889999999999997, 0.26480000000000004},
                  kRel);
  EXPECT_EQ(opt.step_count(), 3);
  EXPECT_EQ(opt.state_dict().size(), 2u);  // "step", "group.0.lr": no momentum, no state
}

TEST(OptimSGD, MomentumDampeningMatchesTorch) {
  auto params = make_params();
  SGD opt(params, {.lr = 0.1, .momentum = 0.9, .dampening = 0.1});
  run_steps(opt, params, 0, 3);
  // torch.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.1), 3 steps
  expect_near_rel(flat_values(params),
                  {0.15945900000000002, -0.241699, 0.300407, -0.43115400000000004, 0.47798500000000005,
                   -0.5799089999999999, 0.047669, -0.11022499999999999, 0.258214},
                  kRel);
  // opt.state[p1]["momentum_buffer"]
  StateDict state = opt.state_dict();
  expect_near_rel(state.at("state.1.momentum_buffer").to_vector<double>(), {-0.07659, -0.08324999999999999, -0.12654},
                  kRel);
}

TEST(OptimSGD, NesterovWeightDecayMatchesTorch) {
  auto params = make_params();
  SGD opt(params, {.lr = 0.1, .momentum = 0.9, .nesterov = true, .weight_decay = 0.01});
  run_steps(opt, params, 0, 3);
  // torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01), 3 steps
  expect_near_rel(flat_values(params),
                  {0.17562489000559997, -0.25274364078480005, 0.28482827289889995, -0.4301761453479, 0.4713616557922,
                   -0.5782102723497, 0.05470731605705001, -0.10209620105795, 0.27406077195035006},
                  kRel);
}

TEST(OptimSGD, WeightDecayMatchesTorch) {
  auto params = make_params();
  SGD opt(params, {.lr = 0.1, .weight_decay = 0.1});
  run_steps(opt, params, 0, 3);
  // torch.optim.SGD(ps, lr=0.1, weight_decay=0.1), 3 steps
  expect_near_rel(flat_values(params),
                  {0.11878775, -0.20852753999999998, 0.27987944, -0.39526245000000004, 0.48167113000000006, -0.58240029,
                   0.056025950000000005, -0.13477636999999998, 0.25741063999999997},
                  kRel);
}

TEST(OptimSGD, MomentumSkipsParamsWithoutGrad) {
  auto params = make_params();
  SGD opt(params, {.lr = 0.1, .momentum = 0.9});
  set_grads(params, 0, {{1, 0}});
  opt.step();
  EXPECT_EQ(params[1].to_vector<double>(), kP1);  // untouched
  StateDict state = opt.state_dict();
  EXPECT_EQ(state.count("state.0.momentum_buffer"), 1u);
  EXPECT_EQ(state.count("state.1.momentum_buffer"), 0u);  // no state before the first gradient
  run_steps(opt, params, 1, 2);
  // torch.optim.SGD(ps, lr=0.1, momentum=0.9), 3 steps, p1.grad None in step 0
  expect_near_rel(flat_values(params),
                  {0.160495, -0.244104, 0.29822400000000004, -0.42904500000000007, 0.47665300000000005, -0.581019,
                   0.04741000000000001, -0.15036999999999998, 0.29255000000000003},
                  kRel);
}

TEST(OptimSGD, RejectsBadOptions) {
  auto params = make_params();
  EXPECT_THROW(SGD(params, {.momentum = 0.0, .nesterov = true}), Error);
  EXPECT_THROW(SGD(params, {.momentum = 0.9, .dampening = 0.1, .nesterov = true}), Error);
  EXPECT_THROW(SGD(params, {.lr = -1.0}), Error);
  EXPECT_THROW(SGD(params, {.momentum = -0.5}), Error);
}

// --- Adam / AdamW ---

TEST(OptimAdam, WeightDecayMatchesTorch) {
  auto params = make_params();
  Adam opt(params, {.lr = 0.01, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.1});
  run_steps(opt, params, 0, 3);
  // torch.optim.Adam(ps, lr=0.01, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1), 3 steps
  expect_near_rel(
      flat_values(params),
      {0.12383108237788468, -0.22085754094864476, 0.30076467932237233, -0.40743446619892826, 0.4765225090197936,
       -0.576499853734089, 0.03448904790249748, -0.12722516983262408, 0.24386375237095137},
      kRel);
  // opt.state[p1]["exp_avg"], ["exp_avg_sq"], ["step"]
  StateDict state = opt.state_dict();
  expect_near_rel(state.at("state.1.exp_avg").to_vector<double>(),
                  {-0.007422078775376492, -0.011706662750533992, -0.008460373253633741}, kRel);
  expect_near_rel(state.at("state.1.exp_avg_sq").to_vector<double>(),
                  {0.0004615787289039692, 0.0003231961702433997, 0.00046276111405615337}, kRel);
  EXPECT_EQ(state.at("state.1.step").dtype(), DType::Int64);
  EXPECT_EQ(state.at("state.1.step").item(), 3.0);
  EXPECT_EQ(state.at("step").item(), 3.0);
  EXPECT_EQ(state.at("group.0.lr").dtype(), DType::Float64);
  EXPECT_EQ(state.at("group.0.lr").item(), 0.01);
}

TEST(OptimAdam, AdamWMatchesTorch) {
  auto params = make_params();
  AdamW opt(params, {.lr = 0.01, .weight_decay = 0.1});
  EXPECT_TRUE(opt.options().decoupled_weight_decay);
  run_steps(opt, params, 0, 3);
  // torch.optim.AdamW(ps, lr=0.01, weight_decay=0.1), 3 steps
  expect_near_rel(
      flat_values(params),
      {0.12431876732159455, -0.22200292206675176, 0.3071682974896536, -0.41217455955067717, 0.47923051450978765,
       -0.5823865862430666, 0.04493633684839342, -0.1282872547930285, 0.24642351490728182},
      kRel);
}

TEST(OptimAdam, AdamWFloat32MatchesTorch) {
  auto params = make_params(DType::Float32);
  AdamW opt(params, {.lr = 0.01, .weight_decay = 0.1});
  run_steps(opt, params, 0, 3);
  EXPECT_EQ(params[0].dtype(), DType::Float32);
  EXPECT_EQ(opt.state_dict().at("state.0.exp_avg").dtype(), DType::Float32);  // state in the param's dtype
  // torch.optim.AdamW(ps, lr=0.01, weight_decay=0.1) on float32 tensors, 3 steps; float32
  // rounding (and torch's fused multiply-adds) allow a few ulps.
  expect_near_rel(
      flat_values(params),
      {0.12431876361370087, -0.22200293838977814, 0.30716830492019653, -0.4121745526790619, 0.47923049330711365,
       -0.5823866724967957, 0.04493634030222893, -0.12828727066516876, 0.24642352759838104},
      1e-6);
}

TEST(OptimAdam, DefaultsAreTorchs) {
  auto params = make_params();
  Adam adam(params);
  EXPECT_EQ(adam.options().lr, 1e-3);
  EXPECT_EQ(adam.options().beta1, 0.9);
  EXPECT_EQ(adam.options().beta2, 0.999);
  EXPECT_EQ(adam.options().eps, 1e-8);
  EXPECT_EQ(adam.param_groups()[0].weight_decay, 0.0);
  EXPECT_FALSE(adam.options().decoupled_weight_decay);
  AdamW adamw(make_params());
  EXPECT_EQ(adamw.param_groups()[0].weight_decay, 0.01);
  EXPECT_TRUE(adamw.options().decoupled_weight_decay);
}

TEST(OptimAdam, TwoParamGroupsMatchTorch) {
  auto params = make_params();
  AdamW opt(std::vector<ParamGroup>{{.params = {params[0]}, .lr = 0.01, .weight_decay = 0.1},
                                    {.params = {params[1]}, .lr = 0.05, .weight_decay = 0.0}});
  run_steps(opt, params, 0, 3);
  // torch.optim.AdamW([{"params": [p0], "lr": 0.01, "weight_decay": 0.1},
  //                    {"params": [p1], "lr": 0.05, "weight_decay": 0.0}]), 3 steps
  expect_near_rel(
      flat_values(params),
      {0.12431876732159455, -0.22200292206675176, 0.3071682974896536, -0.41217455955067717, 0.47923051450978765,
       -0.5823865862430666, 0.02539372765552795, -0.043542544849062954, 0.23577855385468993},
      kRel);
  StateDict state = opt.state_dict();
  EXPECT_EQ(state.at("group.1.lr").item(), 0.05);
  EXPECT_EQ(state.count("state.1.exp_avg"), 1u);  // flat index runs across groups
}

TEST(OptimAdam, SkipsParamsWithoutGrad) {
  auto params = make_params();
  Adam opt(params, {.lr = 0.01});
  const std::set<std::pair<int, int>> skip = {{1, 0}, {0, 2}};
  run_steps(opt, params, 0, 1, skip);
  EXPECT_EQ(params[1].to_vector<double>(), kP1);
  EXPECT_EQ(opt.state_dict().count("state.1.step"), 0u);  // state is created lazily
  run_steps(opt, params, 1, 2, skip);
  // torch.optim.Adam(ps, lr=0.01), 3 steps, p1.grad None in step 0 and p0.grad None in step 2
  // (each parameter's bias correction counts its own steps)
  expect_near_rel(
      flat_values(params),
      {0.11898575086729453, -0.2193970723371953, 0.31266336858992416, -0.4119149796861905, 0.4811562386165953,
       -0.5832994192134475, 0.042935612756163775, -0.14366103734735927, 0.26898575086729454},
      kRel);
  StateDict state = opt.state_dict();
  EXPECT_EQ(state.at("state.0.step").item(), 2.0);
  EXPECT_EQ(state.at("state.1.step").item(), 2.0);
  EXPECT_EQ(state.at("step").item(), 3.0);
}

TEST(OptimAdam, RejectsBadOptions) {
  auto params = make_params();
  EXPECT_THROW(Adam(params, {.beta1 = 1.0}), Error);
  EXPECT_THROW(Adam(params, {.beta2 = -0.1}), Error);
  EXPECT_THROW(Adam(params, {.eps = -1.0}), Error);
  EXPECT_THROW(AdamW(params, {.weight_decay = -0.1}), Error);
}

TEST(OptimAdam, LargeParamsMatchTheSharedKernelElementByElement) {
  // Big enough for the OpenMP path: every element must still get exactly the update of the
  // shared kernels/common functions (what the CUDA kernels will run).
  Generator gen(7);
  Tensor p = randn({300, 400}, {}, &gen);
  p.set_requires_grad(true);
  Tensor q = randn({300, 400}, {.dtype = DType::Float64}, &gen);
  q.set_requires_grad(true);
  std::vector<float> ref_p = p.to_vector<float>(), m(ref_p.size(), 0.f), v(ref_p.size(), 0.f);
  std::vector<double> ref_q = q.to_vector<double>(), buf(ref_q.size());
  AdamW adamw({p}, {.lr = 0.01, .weight_decay = 0.1});
  SGD sgd({q}, {.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
  for (int k = 1; k <= 3; ++k) {
    Tensor gp = randn({300, 400}, {}, &gen), gq = randn({300, 400}, {.dtype = DType::Float64}, &gen);
    p.set_grad(gp);
    q.set_grad(gq);
    adamw.step();
    sgd.step();
    const auto sa = strata_kernels::adam_scalars<float>(0.01, 0.9, 0.999, 1e-8, 0.1, true, k);
    const strata_kernels::SgdScalars<double> ss{.neg_lr = -0.05,
                                                .weight_decay = 0.01,
                                                .momentum = 0.9,
                                                .one_minus_dampening = 1.0 - 0.1,
                                                .nesterov = false,
                                                .init_buffer = k == 1};
    const float* g = gp.data<float>();
    const double* h = gq.data<double>();
    for (size_t i = 0; i < ref_p.size(); ++i) strata_kernels::adam_update(ref_p[i], m[i], v[i], g[i], sa);
    for (size_t i = 0; i < ref_q.size(); ++i) strata_kernels::sgd_momentum_update(ref_q[i], buf[i], h[i], ss);
  }
  // The AdamW loop is compiled per ISA level; on AVX2/AVX-512 machines GCC contracts a*b+c
  // into FMA there, so it may differ from this scalar loop in the last bit.
  std::vector<float> got_p = p.to_vector<float>();
  for (size_t i = 0; i < ref_p.size(); ++i) ASSERT_NEAR(got_p[i], ref_p[i], 2e-6f * (1.0f + std::fabs(ref_p[i]))) << i;
  EXPECT_EQ(q.to_vector<double>(), ref_q);
  // The norm of 120000 elements, accumulated in double by threads, agrees with a serial sum.
  double serial = 0;
  for (float x : p.grad().to_vector<float>()) serial += static_cast<double>(x) * x;
  EXPECT_NEAR(grad_norm_squared({p}), serial, 1e-12 * serial);
}

// --- Optimizer base ---

TEST(Optimizer, ZeroGradInPlaceKeepsViewsAndSetToNone) {
  auto params = make_params();
  // Gradients as views into one flat buffer, as DDP lays them out.
  Tensor bucket = full({9}, 1.5, {.dtype = DType::Float64});
  params[0].set_grad(bucket.narrow(0, 0, 6).view({2, 3}));
  params[1].set_grad(bucket.narrow(0, 6, 3));
  SGD opt(params, {.lr = 0.1});
  opt.zero_grad(/*set_to_none=*/false);
  EXPECT_EQ(bucket.to_vector<double>(), std::vector<double>(9, 0.0));
  EXPECT_EQ(params[0].grad().storage().get(), bucket.storage().get());
  EXPECT_EQ(params[1].grad().storage().get(), bucket.storage().get());
  EXPECT_EQ(params[1].grad().offset(), 6);
  bucket.fill_(2.0);  // still a view: the parameter sees the bucket's new values
  EXPECT_EQ(params[1].grad().to_vector<double>(), std::vector<double>(3, 2.0));
  opt.zero_grad(/*set_to_none=*/true);
  EXPECT_FALSE(params[0].grad().defined());
  EXPECT_FALSE(params[1].grad().defined());
  EXPECT_EQ(bucket.to_vector<double>(), std::vector<double>(9, 2.0));  // dropped, not zeroed
  opt.step();                                                          // no gradients: nothing changes
  EXPECT_EQ(params[0].to_vector<double>(), kP0);
}

TEST(Optimizer, RejectsBadParameters) {
  auto params = make_params();
  expect_error_naming([&] { SGD opt({params[0], params[1], params[0]}); }, {"more than once"});
  Tensor t = zeros({3, 4}, {.dtype = DType::Float64}).transpose(0, 1);
  expect_error_naming([&] { SGD opt({t}); }, {"not contiguous"});
  expect_error_naming([&] { SGD opt({zeros({3}, {.dtype = DType::Int64})}); }, {"int64"});
  expect_error_naming([&] { SGD opt({Tensor()}); }, {"undefined"});
}

TEST(Optimizer, ChangedParamListsAreReported) {
  auto params = make_params();
  Adam opt({params[0]});
  opt.param_groups()[0].params.push_back(params[1]);
  set_grads(params, 0);
  expect_error_naming([&] { opt.step(); }, {"Adam.step", "built with 1"});
}

TEST(Optimizer, ScaleLrUsesInitialLr) {
  auto params = make_params();
  SGD opt(std::vector<ParamGroup>{{.params = {params[0]}, .lr = 0.2}, {.params = {params[1]}, .lr = 0.4}});
  EXPECT_EQ(opt.param_groups()[1].initial_lr, 0.4);
  opt.scale_lr(0.5);
  EXPECT_EQ(opt.param_groups()[0].lr, 0.1);
  EXPECT_EQ(opt.param_groups()[1].lr, 0.2);
  opt.scale_lr(0.25);  // from initial_lr, not compounded
  EXPECT_EQ(opt.param_groups()[1].lr, 0.1);
}

// --- schedules ---

TEST(OptimLrScheduler, CosineWithWarmup) {
  auto params = make_params();
  SGD opt(std::vector<ParamGroup>{{.params = {params[0]}, .lr = 0.5}, {.params = {params[1]}, .lr = 1.0}});
  CosineSchedule sched(opt, {.warmup_steps = 10, .total_steps = 110, .min_lr_ratio = 0.1});
  // Warm-up: (step + 1) / 10.
  EXPECT_DOUBLE_EQ(sched.factor_at(0), 0.1);
  EXPECT_DOUBLE_EQ(sched.factor_at(4), 0.5);
  EXPECT_DOUBLE_EQ(sched.factor_at(9), 1.0);
  // Cosine: 0.1 + 0.9 * (1 + cos(pi * (step - 10) / 100)) / 2.
  EXPECT_DOUBLE_EQ(sched.factor_at(10), 1.0);
  EXPECT_DOUBLE_EQ(sched.factor_at(35), 0.1 + 0.9 * 0.5 * (1.0 + 0.70710678118654752));  // cos(pi/4)
  EXPECT_DOUBLE_EQ(sched.factor_at(60), 0.55);
  EXPECT_DOUBLE_EQ(sched.factor_at(110), 0.1);
  EXPECT_DOUBLE_EQ(sched.factor_at(500), 0.1);  // clamped after the end
  EXPECT_GT(sched.factor_at(109), 0.1);

  // The constructor applies step 0; step() moves on; set_last_step resumes.
  EXPECT_EQ(sched.last_step(), 0);
  EXPECT_DOUBLE_EQ(opt.param_groups()[0].lr, 0.05);
  EXPECT_DOUBLE_EQ(opt.param_groups()[1].lr, 0.1);
  sched.step();
  EXPECT_EQ(sched.last_step(), 1);
  EXPECT_DOUBLE_EQ(opt.param_groups()[1].lr, 0.2);
  sched.set_last_step(60);
  EXPECT_DOUBLE_EQ(opt.param_groups()[0].lr, 0.275);
  EXPECT_DOUBLE_EQ(opt.param_groups()[1].lr, 0.55);
  sched.set_last_step(1000);
  EXPECT_DOUBLE_EQ(opt.param_groups()[1].lr, 0.1);
  EXPECT_THROW(sched.set_last_step(-1), Error);
}

TEST(OptimLrScheduler, NoWarmupConstantAndBadOptions) {
  auto params = make_params();
  SGD opt(params, {.lr = 0.3});
  CosineSchedule no_warmup(opt, {.warmup_steps = 0, .total_steps = 4, .min_lr_ratio = 0.0});
  EXPECT_DOUBLE_EQ(no_warmup.factor_at(0), 1.0);
  EXPECT_DOUBLE_EQ(no_warmup.factor_at(2), 0.5);
  EXPECT_DOUBLE_EQ(no_warmup.factor_at(4), 0.0);
  ConstantSchedule constant(opt);
  EXPECT_DOUBLE_EQ(opt.param_groups()[0].lr, 0.3);
  constant.step();
  EXPECT_DOUBLE_EQ(constant.factor_at(12345), 1.0);
  EXPECT_DOUBLE_EQ(opt.param_groups()[0].lr, 0.3);
  EXPECT_THROW(CosineSchedule(opt, {.warmup_steps = 5, .total_steps = 4}), Error);
  EXPECT_THROW(CosineSchedule(opt, {.warmup_steps = 0, .total_steps = 0}), Error);
  EXPECT_THROW(CosineSchedule(opt, {.warmup_steps = 0, .total_steps = 10, .min_lr_ratio = 1.5}), Error);
  CosineSchedule warmup_only(opt, {.warmup_steps = 4, .total_steps = 4, .min_lr_ratio = 0.2});
  EXPECT_DOUBLE_EQ(warmup_only.factor_at(3), 1.0);
  EXPECT_DOUBLE_EQ(warmup_only.factor_at(4), 0.2);
}

// --- gradient clipping ---

TEST(OptimGradClip, ClipsLikeTorch) {
  auto params = make_params();
  set_grads(params, 0);
  const double squared = grad_norm_squared(params);
  const double norm = clip_grad_norm(params, 0.1);
  // torch.nn.utils.clip_grad_norm_(ps, max_norm=0.1) on the step-0 gradients
  EXPECT_NEAR(norm, 0.3568150781567393, 0.3568150781567393 * kRel);
  EXPECT_NEAR(squared, norm * norm, 1e-15);
  expect_near_rel(flat_values({params[0].grad(), params[1].grad()}),
                  {-0.051847439430331585, 0.020738975772132632, -0.020738975772132632, 0.051847439430331585,
                   0.010369487886066316, -0.03110846365819895, 0.0, -0.041477951544265264, 0.03110846365819895},
                  kRel);
  EXPECT_NEAR(std::sqrt(grad_norm_squared(params)), 0.1, 1e-6);
}

TEST(OptimGradClip, NoOpBelowMaxSkipsMissingGradsAndNonFinite) {
  auto params = make_params(DType::Float32);
  set_grads(params, 1);
  const std::vector<double> before = flat_values({params[0].grad(), params[1].grad()});
  const double norm = clip_grad_norm(params, 10.0);
  EXPECT_GT(norm, 0.0);
  EXPECT_LT(norm, 10.0);
  EXPECT_EQ(flat_values({params[0].grad(), params[1].grad()}), before);  // bitwise unchanged

  params[1].set_grad(Tensor());  // a parameter without gradient counts for nothing
  std::vector<double> g0 = params[0].grad().to_vector<double>();
  double expected = 0;
  for (double x : g0) expected += x * x;
  EXPECT_NEAR(grad_norm_squared(params), expected, 1e-12 * expected);
  scale_grads(params, 2.0);
  EXPECT_EQ(params[0].grad().to_vector<double>()[1], 2.0 * g0[1]);

  Tensor g = params[0].grad();
  g.data<float>()[2] = std::numeric_limits<float>::infinity();
  const std::vector<double> with_inf = g.to_vector<double>();
  EXPECT_TRUE(std::isinf(clip_grad_norm(params, 0.01)));
  EXPECT_EQ(g.to_vector<double>(), with_inf);  // left for the caller to handle
  EXPECT_THROW(clip_grad_norm(params, 0.0), Error);
}

// --- parameter groups ---

TEST(OptimParamGroups, WeightDecaySplitsByDim) {
  auto param = [](const Shape& shape, bool grad = true) {
    Tensor t = zeros(shape);
    t.set_requires_grad(grad);
    return t;
  };
  Tensor wte = param({10, 4}), ln_w = param({4}), ln_b = param({4}), attn_w = param({4, 12}), attn_b = param({12});
  Tensor frozen = param({3, 3}, false);
  std::vector<std::pair<std::string, Tensor>> named = {{"wte.weight", wte},
                                                       {"h.0.ln_1.weight", ln_w},
                                                       {"h.0.ln_1.bias", ln_b},
                                                       {"h.0.attn.c_attn.weight", attn_w},
                                                       {"h.0.attn.c_attn.bias", attn_b},
                                                       {"lm_head.weight", wte},  // tied
                                                       {"frozen", frozen}};
  std::vector<ParamGroup> groups = weight_decay_groups(named, 6e-4, 0.1);
  ASSERT_EQ(groups.size(), 2u);
  ASSERT_EQ(groups[0].params.size(), 2u);
  EXPECT_TRUE(groups[0].params[0].is_same(wte));
  EXPECT_TRUE(groups[0].params[1].is_same(attn_w));
  ASSERT_EQ(groups[1].params.size(), 3u);
  EXPECT_TRUE(groups[1].params[0].is_same(ln_w));
  EXPECT_TRUE(groups[1].params[1].is_same(ln_b));
  EXPECT_TRUE(groups[1].params[2].is_same(attn_b));
  EXPECT_EQ(groups[0].weight_decay, 0.1);
  EXPECT_EQ(groups[1].weight_decay, 0.0);
  EXPECT_EQ(groups[0].lr, 6e-4);
  EXPECT_EQ(groups[1].lr, 6e-4);
  AdamW opt(groups);  // accepted as is (the tied weight appears once)
  EXPECT_EQ(opt.num_params(), 5);
}

// --- state dict ---

namespace {

// Trains 3 steps, saves, trains 2 more; reloads the saved state into a fresh optimizer over
// copies of the saved parameters, trains the same 2 steps and expects identical bits.
template <class MakeOpt>
void expect_resume_bitwise(DType dtype, MakeOpt make_opt) {
  auto params = make_params(dtype);
  auto opt = make_opt(params);
  run_steps(*opt, params, 0, 3, {{1, 0}});
  opt->scale_lr(0.7);  // as a scheduler would: the saved lr differs from the initial one
  const StateDict saved = opt->state_dict();
  std::vector<Tensor> copies;
  for (const Tensor& p : params) copies.push_back(p.detach().clone().set_requires_grad(true));
  run_steps(*opt, params, 3, 2);

  auto fresh = make_opt(copies);
  fresh->load_state_dict(saved);
  EXPECT_EQ(fresh->step_count(), 3);
  EXPECT_EQ(fresh->param_groups()[0].lr, opt->param_groups()[0].lr);
  expect_state_bitwise_equal(fresh->state_dict(), saved);
  run_steps(*fresh, copies, 3, 2);
  for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(bitwise_equal(params[i], copies[i])) << "param " << i;
  expect_state_bitwise_equal(fresh->state_dict(), opt->state_dict());
}

std::unique_ptr<Adam> make_adamw_two_groups(const std::vector<Tensor>& ps) {
  return std::make_unique<AdamW>(std::vector<ParamGroup>{{.params = {ps[0]}, .lr = 0.01, .weight_decay = 0.1},
                                                         {.params = {ps[1]}, .lr = 0.03, .weight_decay = 0.0}});
}

}  // namespace

TEST(OptimStateDict, AdamWResumesBitwise) {
  expect_resume_bitwise(DType::Float32, make_adamw_two_groups);
  expect_resume_bitwise(DType::Float64, make_adamw_two_groups);
}

TEST(OptimStateDict, AdamResumesBitwise) {
  expect_resume_bitwise(DType::Float64, [](const std::vector<Tensor>& ps) {
    return std::make_unique<Adam>(ps, AdamOptions{.lr = 0.01, .weight_decay = 0.05});
  });
}

TEST(OptimStateDict, SGDResumesBitwise) {
  expect_resume_bitwise(DType::Float64, [](const std::vector<Tensor>& ps) {
    return std::make_unique<SGD>(ps, SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.2, .weight_decay = 0.01});
  });
  expect_resume_bitwise(DType::Float32, [](const std::vector<Tensor>& ps) {
    return std::make_unique<SGD>(ps, SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
  });
}

TEST(OptimStateDict, LoadErrorsNameTheKey) {
  auto params = make_params();
  auto opt = make_adamw_two_groups(params);
  run_steps(*opt, params, 0, 2);
  const StateDict good = opt->state_dict();
  auto fresh_params = make_params();
  auto fresh = make_adamw_two_groups(fresh_params);
  const StateDict before = fresh->state_dict();

  StateDict missing = good;
  missing.erase("state.0.exp_avg");
  expect_error_naming([&] { fresh->load_state_dict(missing); }, {"missing key", "\"state.0.exp_avg\"", "[2, 3]"});

  StateDict wrong_shape = good;
  wrong_shape["state.1.exp_avg_sq"] = zeros({4}, {.dtype = DType::Float64});
  expect_error_naming([&] { fresh->load_state_dict(wrong_shape); }, {"\"state.1.exp_avg_sq\"", "[4]", "[3]"});

  StateDict wrong_dtype = good;
  wrong_dtype["state.0.exp_avg"] = zeros({2, 3}, {.dtype = DType::Float32});
  expect_error_naming([&] { fresh->load_state_dict(wrong_dtype); }, {"\"state.0.exp_avg\"", "float32", "float64"});

  StateDict no_step = good;
  no_step.erase("step");
  expect_error_naming([&] { fresh->load_state_dict(no_step); }, {"missing key", "\"step\""});

  StateDict no_lr = good;
  no_lr.erase("group.1.lr");
  expect_error_naming([&] { fresh->load_state_dict(no_lr); }, {"missing key", "\"group.1.lr\""});

  StateDict bad_step = good;
  bad_step["state.1.step"] = scalar_tensor(2.0, {.dtype = DType::Float64});
  expect_error_naming([&] { fresh->load_state_dict(bad_step); }, {"\"state.1.step\"", "int64"});

  StateDict extra = good;
  extra["state.7.exp_avg"] = zeros({3}, {.dtype = DType::Float64});
  expect_error_naming([&] { fresh->load_state_dict(extra); }, {"unexpected key", "\"state.7.exp_avg\""});

  // A failed load changes nothing.
  expect_state_bitwise_equal(fresh->state_dict(), before);
  EXPECT_EQ(fresh->param_groups()[1].lr, 0.03);

  // State of momentum SGD does not fit plain SGD.
  auto sgd_params = make_params();
  SGD momentum_sgd(sgd_params, {.lr = 0.1, .momentum = 0.9});
  run_steps(momentum_sgd, sgd_params, 0, 1);
  SGD plain(make_params(), {.lr = 0.1});
  expect_error_naming([&] { plain.load_state_dict(momentum_sgd.state_dict()); },
                      {"unexpected key", "\"state.0.momentum_buffer\""});
  fresh->load_state_dict(good);  // and the good one loads
  expect_state_bitwise_equal(fresh->state_dict(), good);
}
