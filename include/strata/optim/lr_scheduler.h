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

}  // namespace strata::optim
