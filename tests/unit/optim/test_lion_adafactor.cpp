// Lion, Adafactor and SGD's Nesterov check: bad options, parameters without gradients, state
// round trips. (Their values against PyTorch and the definitions: tests/reference/
// test_optim_reference.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "strata/strata.h"
#include "strata_kernels/common/lion.h"
#include "unit/optim/optim_test_helpers.h"

using namespace strata;
using namespace strata::optim;
using namespace strata::optim_test;

// --- Lion ---

TEST(OptimLion, DefaultsAreThePapers) {
  Lion opt(make_params());
  EXPECT_EQ(opt.options().lr, 1e-4);
  EXPECT_EQ(opt.options().beta1, 0.9);
  EXPECT_EQ(opt.options().beta2, 0.99);
  EXPECT_EQ(opt.param_groups()[0].weight_decay, 0.0);
  EXPECT_TRUE(opt.is_elementwise());
}

TEST(OptimLion, RejectsBadOptions) {
  auto params = make_params();
  expect_error_naming([&] { Lion(params, {.lr = -1e-4}); }, {"invalid lr", "-0.0001"});
  expect_error_naming([&] { Lion(params, {.beta1 = 1.0}); }, {"Lion", "beta1", "0 <= beta1 < 1"});
  expect_error_naming([&] { Lion(params, {.beta2 = -0.1}); }, {"Lion", "beta2"});
  expect_error_naming([&] { Lion(params, {.weight_decay = -0.1}); }, {"weight_decay"});
}

TEST(OptimLion, SkipsParamsWithoutGrad) {
  expect_skips_params_without_grad([](const std::vector<Tensor>& ps) {
    return std::make_unique<Lion>(ps, LionOptions{.lr = 0.01, .weight_decay = 0.1});
  });
}

TEST(OptimLion, ResumesBitwise) {
  const MakeOptimizer make = [](const std::vector<Tensor>& ps) {
    return std::make_unique<Lion>(std::vector<ParamGroup>{{.params = {ps[0], ps[2]}, .lr = 0.01, .weight_decay = 0.1},
                                                          {.params = {ps[1]}, .lr = 0.02}});
  };
  expect_resume_bitwise(DType::Float32, make);
  expect_resume_bitwise(DType::Float64, make);
}

TEST(OptimLion, EveryElementGetsTheSharedUpdateAndNanShows) {
  // Large enough for the OpenMP path, on which every element must still get lion.h's update
  // (what the CUDA kernel runs).
  Generator gen(3);
  Tensor p = randn({300, 400}, {.dtype = DType::Float64}, &gen);
  p.set_requires_grad(true);
  std::vector<double> ref = p.to_vector<double>(), m(ref.size(), 0.0);
  Lion opt({p}, {.lr = 0.01, .weight_decay = 0.1});
  for (int k = 0; k < 3; ++k) {
    Tensor g = randn({300, 400}, {.dtype = DType::Float64}, &gen);
    p.set_grad(g);
    opt.step();
    const auto s = strata_kernels::lion_scalars<double>(0.01, 0.9, 0.99, 0.1);
    const double* gd = g.data<double>();
    for (size_t i = 0; i < ref.size(); ++i) strata_kernels::lion_update(ref[i], m[i], gd[i], s);
  }
  EXPECT_EQ(p.to_vector<double>(), ref);
  EXPECT_EQ(strata_kernels::sign_of(0.0), 0.0);
  // A NaN gradient makes the parameter NaN (sign(NaN) is NaN, as torch.sign), not a silent 0.
  Tensor q = zeros({2}, {.dtype = DType::Float64}).set_requires_grad(true);
  Lion nan_opt({q}, {.lr = 0.01});
  q.set_grad(from_vector<double>({std::numeric_limits<double>::quiet_NaN(), 1.0}, {2}));
  nan_opt.step();
  EXPECT_TRUE(std::isnan(q.to_vector<double>()[0]));
  EXPECT_EQ(q.to_vector<double>()[1], -0.01);
}

TEST(OptimLion, LoadRefusesOtherOptimizersState) {
  auto params = make_params();
  Adam adam(params, {.lr = 0.01});
  run_steps(adam, params, 0, 1);
  Lion lion(make_params());
  expect_error_naming([&] { lion.load_state_dict(adam.state_dict()); },
                      {"Lion.load_state_dict", "unexpected key", "state.0."});
}

// --- Adafactor ---

TEST(OptimAdafactor, DefaultsAreTransformers) {
  Adafactor opt(make_params());
  const AdafactorOptions& o = opt.options();
  EXPECT_EQ(o.lr, 0.0);
  EXPECT_EQ(o.eps1, 1e-30);
  EXPECT_EQ(o.eps2, 1e-3);
  EXPECT_EQ(o.clip_threshold, 1.0);
  EXPECT_EQ(o.decay_rate, -0.8);
  EXPECT_FALSE(o.beta1.has_value());
  EXPECT_TRUE(o.scale_parameter);
  EXPECT_TRUE(o.relative_step);
  EXPECT_FALSE(o.warmup_init);
  EXPECT_FALSE(opt.is_elementwise());
}

TEST(OptimAdafactor, RejectsBadOptions) {
  auto params = make_params();
  expect_error_naming([&] { Adafactor(params, {.lr = 1e-3}); }, {"relative_step", "lr 0.001"});
  expect_error_naming([&] { Adafactor(params, {.lr = -1e-3, .relative_step = false}); }, {"invalid lr"});
  expect_error_naming([&] { Adafactor(params, {.relative_step = false, .warmup_init = true}); },
                      {"warmup_init needs relative_step"});
  expect_error_naming([&] { Adafactor(params, {.decay_rate = 0.0}); }, {"decay_rate"});
  expect_error_naming([&] { Adafactor(params, {.clip_threshold = 0.0}); }, {"clip_threshold"});
  expect_error_naming([&] { Adafactor(params, {.beta1 = 1.0}); }, {"beta1", "0 <= beta1 < 1"});
  expect_error_naming([&] { Adafactor(params, {.eps1 = -1.0}); }, {"eps1"});
}

TEST(OptimAdafactor, SkipsParamsWithoutGrad) {
  expect_skips_params_without_grad([](const std::vector<Tensor>& ps) {
    return std::make_unique<Adafactor>(ps, AdafactorOptions{.beta1 = 0.9, .weight_decay = 0.1});
  });
}

TEST(OptimAdafactor, ResumesBitwise) {
  for (const AdafactorOptions& o :
       {AdafactorOptions{}, AdafactorOptions{.lr = 0.01, .beta1 = 0.9, .weight_decay = 0.05, .relative_step = false}}) {
    const MakeOptimizer make = [o](const std::vector<Tensor>& ps) { return std::make_unique<Adafactor>(ps, o); };
    expect_resume_bitwise(DType::Float32, make);
    expect_resume_bitwise(DType::Float64, make);
  }
}

TEST(OptimAdafactor, StateShapesAndLoadErrors) {
  auto params = make_params();
  Adafactor opt(params, {.beta1 = 0.9});
  run_steps(opt, params, 0, 2, {{1, 0}});
  const StateDict good = opt.state_dict();
  EXPECT_EQ(good.at("state.0.exp_avg_sq_row").shape(), Shape({2}));
  EXPECT_EQ(good.at("state.0.exp_avg_sq_col").shape(), Shape({3}));
  EXPECT_EQ(good.at("state.2.exp_avg_sq_row").shape(), Shape({2, 2}));
  EXPECT_EQ(good.at("state.1.exp_avg_sq").shape(), Shape({3}));
  EXPECT_EQ(good.at("state.0.exp_avg").shape(), Shape({2, 3}));
  EXPECT_EQ(good.at("state.0.step").item(), 2.0);
  EXPECT_EQ(good.at("state.1.step").item(), 1.0);  // its own count: no gradient in step 0

  auto fresh_params = make_params();
  Adafactor fresh(fresh_params, {.beta1 = 0.9});
  StateDict wrong = good;
  wrong["state.0.exp_avg_sq_col"] = zeros({2}, {.dtype = DType::Float64});
  expect_error_naming([&] { fresh.load_state_dict(wrong); }, {"\"state.0.exp_avg_sq_col\"", "[2]", "[3]"});
  StateDict missing = good;
  missing.erase("state.2.exp_avg");
  expect_error_naming([&] { fresh.load_state_dict(missing); }, {"missing key", "\"state.2.exp_avg\""});
  EXPECT_EQ(fresh.state_dict().size(), 2u);  // a failed load changed nothing
  Adafactor no_beta1(make_params());
  expect_error_naming([&] { no_beta1.load_state_dict(good); }, {"unexpected key", "exp_avg\""});
}

TEST(OptimAdafactor, ClipsTheUpdateRms) {
  // One element, relative_step off, no parameter scaling: the first update is g / sqrt(g^2
  // + eps1) = sign(g) (RMS 1), clipped to clip_threshold, times lr.
  Tensor p = zeros({1}, {.dtype = DType::Float64}).set_requires_grad(true);
  Adafactor opt({p}, {.lr = 0.1, .clip_threshold = 0.25, .scale_parameter = false, .relative_step = false});
  p.set_grad(full({1}, 3.0, {.dtype = DType::Float64}));
  opt.step();
  EXPECT_DOUBLE_EQ(p.to_vector<double>()[0], -0.1 * 0.25);
}

// --- SGD Nesterov ---

TEST(OptimSGD, NesterovNeedsMomentumWithoutDampening) {
  auto params = make_params();
  expect_error_naming([&] { SGD(params, {.nesterov = true}); }, {"nesterov", "momentum > 0", "dampening == 0"});
  expect_error_naming([&] { SGD(params, {.momentum = 0.9, .dampening = 0.5, .nesterov = true}); },
                      {"nesterov", "dampening 0.5"});
  expect_skips_params_without_grad([](const std::vector<Tensor>& ps) {
    return std::make_unique<SGD>(ps, SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
  });
  expect_skips_params_without_grad(
      [](const std::vector<Tensor>& ps) { return std::make_unique<AdamW>(ps, AdamWOptions{.lr = 0.01}); });
}
