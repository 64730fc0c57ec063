#pragma once
#include <cstdint>

#include "strata/optim/optimizer.h"

namespace strata::optim {

// Sets the optimizer's lr from a factor of each group's initial_lr, per step. The usage is
// torch's: the constructor applies the factor for step 0, and step() is called after each
// optimizer.step() to apply the next one.
//
//   optim::AdamW opt(params);
//   optim::CosineSchedule sched(opt, {.warmup_steps = 100, .total_steps = 5000});
//   for (...) { loss.backward(); opt.step(); opt.zero_grad(); sched.step(); }
//
// To resume after N optimizer steps: load the optimizer state, then set_last_step(N).
class LrScheduler {
 public:
  explicit LrScheduler(Optimizer& optimizer) : optimizer_(optimizer) {}
  virtual ~LrScheduler() = default;
  LrScheduler(const LrScheduler&) = delete;
  LrScheduler& operator=(const LrScheduler&) = delete;

  // The lr multiplier for step `step` (>= 0).
  virtual double factor_at(int64_t step) const = 0;
  // Advances to the next step and applies its factor.
  void step() { set_last_step(last_step_ + 1); }
  // The step whose factor is applied now.
  int64_t last_step() const { return last_step_; }
  // Jumps to `step` (>= 0) and applies its factor.
  void set_last_step(int64_t step);

 protected:
  // Derived constructors call this once their parameters are set (factor_at is virtual).
  void apply() { optimizer_.scale_lr(factor_at(last_step_)); }

 private:
  Optimizer& optimizer_;
  int64_t last_step_ = 0;
};

// lr stays at initial_lr.
class ConstantSchedule : public LrScheduler {
 public:
  explicit ConstantSchedule(Optimizer& optimizer) : LrScheduler(optimizer) { apply(); }
  double factor_at(int64_t) const override { return 1.0; }
};

struct CosineScheduleOptions {
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;  // the step at which the decay reaches min_lr_ratio
  double min_lr_ratio = 0.1;
};

// Linear warm-up, then cosine decay (the nanoGPT schedule):
//   step < warmup:          (step + 1) / warmup
//   warmup <= step < total: r + (1 - r) * (1 + cos(pi * (step - warmup) / (total - warmup))) / 2
//   step >= total:          r                                        (r = min_lr_ratio)
class CosineSchedule : public LrScheduler {
 public:
  CosineSchedule(Optimizer& optimizer, CosineScheduleOptions options);
  double factor_at(int64_t step) const override;
  const CosineScheduleOptions& options() const { return options_; }

 private:
  CosineScheduleOptions options_;
};

// The shape of a decay from 1 to r = min_lr_ratio over progress x in [0, 1]:
//   Constant: 1 (no decay)    Linear: r + (1 - r) (1 - x)
//   Cosine:   r + (1 - r) (1 + cos(pi x)) / 2    OneMinusSqrt: r + (1 - r) (1 - sqrt(x))
enum class DecayShape { Constant, Linear, Cosine, OneMinusSqrt };
double decay_factor(DecayShape shape, double progress, double min_lr_ratio);

struct WarmupDecayOptions {
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;  // the step at which the decay reaches min_lr_ratio
  DecayShape decay = DecayShape::Linear;
  double min_lr_ratio = 0.0;
};

// Linear warm-up, then a decay of the given shape (transformers' get_linear_schedule_with_warmup
// and get_constant_schedule_with_warmup, with a floor):
//   step < warmup:          (step + 1) / warmup
//   warmup <= step < total: decay_factor(decay, (step - warmup) / (total - warmup), r)
//   step >= total:          decay_factor(decay, 1, r)
// With DecayShape::Cosine this is CosineSchedule.
class WarmupDecaySchedule : public LrScheduler {
 public:
  WarmupDecaySchedule(Optimizer& optimizer, WarmupDecayOptions options);
  double factor_at(int64_t step) const override;
  const WarmupDecayOptions& options() const { return options_; }

 private:
  WarmupDecayOptions options_;
};

struct StepScheduleOptions {
  int64_t step_size = 1;  // steps between decays
  double gamma = 0.1;     // factor per decay
};

// torch.optim.lr_scheduler.StepLR: gamma^(step / step_size) (integer division).
class StepSchedule : public LrScheduler {
 public:
  StepSchedule(Optimizer& optimizer, StepScheduleOptions options);
  double factor_at(int64_t step) const override;
  const StepScheduleOptions& options() const { return options_; }

 private:
  StepScheduleOptions options_;
};

struct OneCycleOptions {
  int64_t total_steps = 1;
  double pct_start = 0.3;         // the share of the steps spent raising the lr
  double div_factor = 25.0;       // the first lr is max_lr / div_factor
  double final_div_factor = 1e4;  // the last is the first / final_div_factor
  bool cosine = true;             // false: linear annealing (anneal_strategy='linear')
  bool three_phase = false;       // back down to the first lr before the final annealing
};

// torch.optim.lr_scheduler.OneCycleLR with the groups' initial_lr as max_lr (the factor is
// relative to it), for the lr only (torch also cycles momentum with cycle_momentum=True).
// Phases end at steps pct_start * total - 1, (with three_phase: 2 * pct_start * total - 2)
// and total - 1; each anneals between its end factors over its steps. Steps past total - 1
// hold the final factor (torch raises past total_steps).
class OneCycleSchedule : public LrScheduler {
 public:
  OneCycleSchedule(Optimizer& optimizer, OneCycleOptions options);
  double factor_at(int64_t step) const override;
  const OneCycleOptions& options() const { return options_; }

 private:
  OneCycleOptions options_;
};

struct WsdOptions {
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;      // the step at which the decay reaches min_lr_ratio
  double decay_fraction = 0.1;  // the share of total_steps spent decaying (rounded to steps)
  DecayShape decay = DecayShape::Linear;
  double min_lr_ratio = 0.0;
};

// Warmup-stable-decay (the "trapezoidal" schedule of Hägele et al. 2024 / MiniCPM): linear
// warm-up (step + 1) / warmup, then 1 until the decay starts at total - D (D =
// round(decay_fraction * total)), then decay_factor(decay, (step - (total - D)) / D, r),
// r from step total on. Checks warmup + D <= total.
class WsdSchedule : public LrScheduler {
 public:
  WsdSchedule(Optimizer& optimizer, WsdOptions options);
  double factor_at(int64_t step) const override;
  const WsdOptions& options() const { return options_; }
  int64_t decay_steps() const { return decay_steps_; }

 private:
  WsdOptions options_;
  int64_t decay_steps_;
};

}  // namespace strata::optim
