#include "strata/optim/lr_scheduler.h"

#include <cmath>
#include <numbers>
#include <vector>

namespace strata::optim {
namespace {

// (step + 1) / warmup: the first step already trains, at 1 / warmup of the lr.
double warmup_factor(int64_t step, int64_t warmup) {
  return static_cast<double>(step + 1) / static_cast<double>(warmup);
}

void check_warmup_total(const char* who, int64_t warmup, int64_t total) {
  STRATA_CHECK(warmup >= 0 && total > 0 && warmup <= total, who,
               ": needs 0 <= warmup_steps <= total_steps and total_steps > 0 (warmup_steps ", warmup, ", total_steps ",
               total, ")");
}

void check_ratio(const char* who, const char* name, double value) {
  STRATA_CHECK(value >= 0 && value <= 1, who, ": ", name, " ", value, " is outside [0, 1]");
}

}  // namespace

void LrScheduler::set_last_step(int64_t step) {
  STRATA_CHECK(step >= 0, "LrScheduler.set_last_step: step ", step, " is negative");
  last_step_ = step;
  apply();
}

double decay_factor(DecayShape shape, double progress, double min_lr_ratio) {
  const double r = min_lr_ratio;
  switch (shape) {
    case DecayShape::Constant: return 1.0;
    case DecayShape::Linear: return r + (1.0 - r) * (1.0 - progress);
    case DecayShape::Cosine: return r + (1.0 - r) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
    case DecayShape::OneMinusSqrt: return r + (1.0 - r) * (1.0 - std::sqrt(progress));
  }
  STRATA_FAIL("decay_factor: unknown DecayShape ", static_cast<int>(shape));
}

CosineSchedule::CosineSchedule(Optimizer& optimizer, CosineScheduleOptions options)
    : LrScheduler(optimizer), options_(options) {
  check_warmup_total("CosineSchedule", options_.warmup_steps, options_.total_steps);
  check_ratio("CosineSchedule", "min_lr_ratio", options_.min_lr_ratio);
  apply();
}

double CosineSchedule::factor_at(int64_t step) const {
  STRATA_CHECK(step >= 0, "CosineSchedule.factor_at: step ", step, " is negative");
  const int64_t warmup = options_.warmup_steps;
  if (step < warmup) return warmup_factor(step, warmup);
  const double r = options_.min_lr_ratio;
  if (step >= options_.total_steps) return r;  // also covers total == warmup (no decay phase)
  const double progress = static_cast<double>(step - warmup) / static_cast<double>(options_.total_steps - warmup);
  return decay_factor(DecayShape::Cosine, progress, r);
}

WarmupDecaySchedule::WarmupDecaySchedule(Optimizer& optimizer, WarmupDecayOptions options)
    : LrScheduler(optimizer), options_(options) {
  check_warmup_total("WarmupDecaySchedule", options_.warmup_steps, options_.total_steps);
  check_ratio("WarmupDecaySchedule", "min_lr_ratio", options_.min_lr_ratio);
  apply();
}

double WarmupDecaySchedule::factor_at(int64_t step) const {
  STRATA_CHECK(step >= 0, "WarmupDecaySchedule.factor_at: step ", step, " is negative");
  const int64_t warmup = options_.warmup_steps;
  if (step < warmup) return warmup_factor(step, warmup);
  if (step >= options_.total_steps) return decay_factor(options_.decay, 1.0, options_.min_lr_ratio);
  const double progress = static_cast<double>(step - warmup) / static_cast<double>(options_.total_steps - warmup);
  return decay_factor(options_.decay, progress, options_.min_lr_ratio);
}

StepSchedule::StepSchedule(Optimizer& optimizer, StepScheduleOptions options)
    : LrScheduler(optimizer), options_(options) {
  STRATA_CHECK(options_.step_size > 0, "StepSchedule: step_size ", options_.step_size, " (expected > 0)");
  STRATA_CHECK(std::isfinite(options_.gamma) && options_.gamma >= 0, "StepSchedule: invalid gamma ", options_.gamma);
  apply();
}

double StepSchedule::factor_at(int64_t step) const {
  STRATA_CHECK(step >= 0, "StepSchedule.factor_at: step ", step, " is negative");
  const int64_t decays = step / options_.step_size;  // whole periods only, as StepLR
  return std::pow(options_.gamma, static_cast<double>(decays));
}

OneCycleSchedule::OneCycleSchedule(Optimizer& optimizer, OneCycleOptions options)
    : LrScheduler(optimizer), options_(options) {
  STRATA_CHECK(options_.total_steps > 0, "OneCycleSchedule: total_steps ", options_.total_steps, " (expected > 0)");
  check_ratio("OneCycleSchedule", "pct_start", options_.pct_start);
  STRATA_CHECK(std::isfinite(options_.div_factor) && options_.div_factor > 0, "OneCycleSchedule: invalid div_factor ",
               options_.div_factor, " (expected > 0)");
  STRATA_CHECK(std::isfinite(options_.final_div_factor) && options_.final_div_factor > 0,
               "OneCycleSchedule: invalid final_div_factor ", options_.final_div_factor, " (expected > 0)");
  apply();
}

double OneCycleSchedule::factor_at(int64_t step) const {
  STRATA_CHECK(step >= 0, "OneCycleSchedule.factor_at: step ", step, " is negative");
  const OneCycleOptions& o = options_;
  const double first = 1.0 / o.div_factor, last = first / o.final_div_factor;
  const auto total = static_cast<double>(o.total_steps);
  struct Phase {
    double end_step, start, end;
  };
  std::vector<Phase> phases = {{o.pct_start * total - 1, first, 1.0}};
  if (o.three_phase) phases.push_back({2 * o.pct_start * total - 2, 1.0, first});
  phases.push_back({total - 1, o.three_phase ? first : 1.0, last});
  const auto t = static_cast<double>(step);
  if (t >= total - 1) return last;
  double start_step = 0;
  for (size_t i = 0; i < phases.size(); ++i) {
    const Phase& ph = phases[i];
    if (t <= ph.end_step || i + 1 == phases.size()) {
      // A phase of no steps (pct_start * total = 1) is at its end (torch divides by zero).
      const double pct = ph.end_step == start_step ? 1.0 : (t - start_step) / (ph.end_step - start_step);
      if (!o.cosine) return (ph.end - ph.start) * pct + ph.start;
      return ph.end + (ph.start - ph.end) / 2.0 * (std::cos(std::numbers::pi * pct) + 1);
    }
    start_step = ph.end_step;
  }
  return last;  // not reached: the last phase always matches
}

WsdSchedule::WsdSchedule(Optimizer& optimizer, WsdOptions options)
    : LrScheduler(optimizer), options_(options), decay_steps_(0) {
  check_warmup_total("WsdSchedule", options_.warmup_steps, options_.total_steps);
  check_ratio("WsdSchedule", "decay_fraction", options_.decay_fraction);
  check_ratio("WsdSchedule", "min_lr_ratio", options_.min_lr_ratio);
  decay_steps_ = std::llround(options_.decay_fraction * static_cast<double>(options_.total_steps));
  STRATA_CHECK(options_.warmup_steps + decay_steps_ <= options_.total_steps, "WsdSchedule: warmup_steps ",
               options_.warmup_steps, " + decay steps ", decay_steps_, " (decay_fraction ", options_.decay_fraction,
               ") exceed total_steps ", options_.total_steps);
  apply();
}

double WsdSchedule::factor_at(int64_t step) const {
  STRATA_CHECK(step >= 0, "WsdSchedule.factor_at: step ", step, " is negative");
  const int64_t warmup = options_.warmup_steps, decay_start = options_.total_steps - decay_steps_;
  if (step < warmup) return warmup_factor(step, warmup);
  if (step >= options_.total_steps) return decay_factor(options_.decay, 1.0, options_.min_lr_ratio);
  if (step < decay_start) return 1.0;
  const double progress = static_cast<double>(step - decay_start) / static_cast<double>(decay_steps_);
  return decay_factor(options_.decay, progress, options_.min_lr_ratio);
}

}  // namespace strata::optim
