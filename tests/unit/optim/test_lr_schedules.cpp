// The warm-up/decay, step, one-cycle and warmup-stable-decay schedules: closed-form values,
// bad options and resuming. (Against torch's schedulers: tests/reference/test_optim_reference.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "strata/strata.h"
#include "unit/optim/optim_test_helpers.h"

using namespace strata;
using namespace strata::optim;
using namespace strata::optim_test;

namespace {

SGD make_sgd(double lr) { return SGD(make_params(), {.lr = lr}); }

}  // namespace

TEST(OptimSchedules, WarmupThenLinearCosineOrConstant) {
  SGD opt(make_params(), {.lr = 0.5});
  WarmupDecaySchedule linear(opt, {.warmup_steps = 4, .total_steps = 14, .min_lr_ratio = 0.2});
  EXPECT_DOUBLE_EQ(opt.param_groups()[0].lr, 0.125);  // the constructor applies step 0: 1/4
  EXPECT_DOUBLE_EQ(linear.factor_at(3), 1.0);
  EXPECT_DOUBLE_EQ(linear.factor_at(4), 1.0);
  EXPECT_DOUBLE_EQ(linear.factor_at(9), 0.2 + 0.8 * 0.5);
  EXPECT_DOUBLE_EQ(linear.factor_at(14), 0.2);
  EXPECT_DOUBLE_EQ(linear.factor_at(1000), 0.2);
  WarmupDecaySchedule constant(opt, {.warmup_steps = 2, .total_steps = 3, .decay = DecayShape::Constant});
  EXPECT_DOUBLE_EQ(constant.factor_at(0), 0.5);
  EXPECT_DOUBLE_EQ(constant.factor_at(500), 1.0);
  // With DecayShape::Cosine it is CosineSchedule, bit for bit.
  WarmupDecaySchedule cosine(opt,
                             {.warmup_steps = 3, .total_steps = 17, .decay = DecayShape::Cosine, .min_lr_ratio = 0.1});
  CosineSchedule reference(opt, {.warmup_steps = 3, .total_steps = 17, .min_lr_ratio = 0.1});
  for (int64_t s = 0; s < 25; ++s) EXPECT_EQ(cosine.factor_at(s), reference.factor_at(s)) << s;
  expect_error_naming([&] { WarmupDecaySchedule(opt, {.warmup_steps = 5, .total_steps = 4}); },
                      {"WarmupDecaySchedule", "warmup_steps 5", "total_steps 4"});
  expect_error_naming([&] { WarmupDecaySchedule(opt, {.total_steps = 4, .min_lr_ratio = -0.1}); },
                      {"min_lr_ratio", "outside [0, 1]"});
}

TEST(OptimSchedules, StepDecay) {
  SGD opt = make_sgd(0.8);
  StepSchedule sched(opt, {.step_size = 3, .gamma = 0.5});
  EXPECT_EQ(sched.factor_at(0), 1.0);
  EXPECT_EQ(sched.factor_at(2), 1.0);
  EXPECT_EQ(sched.factor_at(3), 0.5);
  EXPECT_EQ(sched.factor_at(8), 0.25);
  EXPECT_EQ(sched.factor_at(9), 0.125);
  sched.set_last_step(6);
  EXPECT_EQ(opt.param_groups()[0].lr, 0.2);
  expect_error_naming([&] { StepSchedule(opt, {.step_size = 0}); }, {"StepSchedule", "step_size 0"});
  expect_error_naming([&] { StepSchedule(opt, {.step_size = 2, .gamma = -1.0}); }, {"gamma -1"});
}

TEST(OptimSchedules, OneCycle) {
  SGD opt = make_sgd(1.0);
  OneCycleSchedule sched(opt, {.total_steps = 100});       // torch's defaults: 0.3, 25, 1e4, cosine
  EXPECT_NEAR(opt.param_groups()[0].lr, 1.0 / 25, 1e-15);  // 1 + (1/25 - 1): cancellation
  EXPECT_DOUBLE_EQ(sched.factor_at(29), 1.0);              // the peak at pct_start * total - 1
  // Half way down: the mean of the peak and the final factor.
  const double last = 1.0 / 25 / 1e4;
  EXPECT_DOUBLE_EQ(sched.factor_at(29 + 35), (1.0 + last) / 2);
  EXPECT_DOUBLE_EQ(sched.factor_at(99), last);
  EXPECT_DOUBLE_EQ(sched.factor_at(500), last);  // held past the end
  // Rising phase: cosine from 1/25 to 1 over 29 steps.
  const double pct = 10.0 / 29.0;
  EXPECT_DOUBLE_EQ(sched.factor_at(10), 1.0 + (1.0 / 25 - 1.0) / 2 * (std::cos(std::numbers::pi * pct) + 1));
  OneCycleSchedule linear(opt, {.total_steps = 10, .pct_start = 0.5, .div_factor = 2, .cosine = false});
  EXPECT_DOUBLE_EQ(linear.factor_at(2), 0.5 + 0.5 * 2 / 4);
  // A phase of no steps (pct_start * total = 1) is at its end, not 0/0.
  OneCycleSchedule short_rise(opt, {.total_steps = 10, .pct_start = 0.1});
  EXPECT_EQ(short_rise.factor_at(0), 1.0);
  expect_error_naming([&] { OneCycleSchedule(opt, {.total_steps = 10, .pct_start = 1.5}); }, {"pct_start 1.5"});
  expect_error_naming([&] { OneCycleSchedule(opt, {.total_steps = 0}); }, {"total_steps 0"});
  expect_error_naming([&] { OneCycleSchedule(opt, {.total_steps = 5, .div_factor = 0}); }, {"div_factor"});
}

TEST(OptimSchedules, WarmupStableDecay) {
  SGD opt = make_sgd(1.0);
  WsdSchedule sched(opt, {.warmup_steps = 10, .total_steps = 100, .decay_fraction = 0.2, .min_lr_ratio = 0.1});
  EXPECT_EQ(sched.decay_steps(), 20);
  EXPECT_DOUBLE_EQ(sched.factor_at(0), 0.1);
  EXPECT_DOUBLE_EQ(sched.factor_at(9), 1.0);
  EXPECT_DOUBLE_EQ(sched.factor_at(50), 1.0);
  EXPECT_DOUBLE_EQ(sched.factor_at(80), 1.0);  // the decay starts at total - 20
  EXPECT_DOUBLE_EQ(sched.factor_at(90), 0.1 + 0.9 * 0.5);
  EXPECT_DOUBLE_EQ(sched.factor_at(100), 0.1);
  WsdSchedule sqrt_decay(opt, {.total_steps = 100, .decay_fraction = 0.25, .decay = DecayShape::OneMinusSqrt});
  EXPECT_DOUBLE_EQ(sqrt_decay.factor_at(0), 1.0);  // no warm-up
  EXPECT_DOUBLE_EQ(sqrt_decay.factor_at(75 + 4), 1.0 - std::sqrt(4.0 / 25.0));
  WsdSchedule no_decay(opt, {.total_steps = 10, .decay_fraction = 0.0});
  EXPECT_DOUBLE_EQ(no_decay.factor_at(9), 1.0);
  expect_error_naming([&] { WsdSchedule(opt, {.warmup_steps = 50, .total_steps = 100, .decay_fraction = 0.6}); },
                      {"WsdSchedule", "warmup_steps 50", "decay steps 60", "total_steps 100"});
  expect_error_naming([&] { WsdSchedule(opt, {.total_steps = 100, .decay_fraction = 1.5}); }, {"decay_fraction 1.5"});
}

TEST(OptimSchedules, ResumingAtAStepEqualsSteppingThere) {
  SGD a = make_sgd(0.3), b = make_sgd(0.3);
  WsdSchedule stepped(a, {.warmup_steps = 3, .total_steps = 20, .decay_fraction = 0.3});
  WsdSchedule resumed(b, {.warmup_steps = 3, .total_steps = 20, .decay_fraction = 0.3});
  for (int s = 0; s < 17; ++s) stepped.step();
  resumed.set_last_step(17);
  EXPECT_EQ(a.param_groups()[0].lr, b.param_groups()[0].lr);
  EXPECT_LT(a.param_groups()[0].lr, 0.3);
  EXPECT_THROW(resumed.factor_at(-1), Error);
}
