#include "strata/optim/lr_scheduler.h"

#include <cmath>
#include <numbers>

namespace strata::optim {

void LrScheduler::set_last_step(int64_t step) {
  STRATA_CHECK(step >= 0, "LrScheduler.set_last_step: step ", step, " is negative");
  last_step_ = step;
  apply();
}

CosineSchedule::CosineSchedule(Optimizer& optimizer, CosineScheduleOptions options)
    : LrScheduler(optimizer), options_(options) {
  STRATA_CHECK(options_.warmup_steps >= 0 && options_.total_steps > 0 && options_.warmup_steps <= options_.total_steps,
               "CosineSchedule: needs 0 <= warmup_steps <= total_steps and total_steps > 0 (warmup_steps ",
               options_.warmup_steps, ", total_steps ", options_.total_steps, ")");
  STRATA_CHECK(options_.min_lr_ratio >= 0 && options_.min_lr_ratio <= 1, "CosineSchedule: min_lr_ratio ",
               options_.min_lr_ratio, " is outside [0, 1]");
  apply();
}

double CosineSchedule::factor_at(int64_t step) const {
  STRATA_CHECK(step >= 0, "CosineSchedule.factor_at: step ", step, " is negative");
  const int64_t warmup = options_.warmup_steps;
  if (step < warmup) return static_cast<double>(step + 1) / static_cast<double>(warmup);
  const double r = options_.min_lr_ratio;
  if (step >= options_.total_steps) return r;  // also covers total == warmup (no decay phase)
  const double progress = static_cast<double>(step - warmup) / static_cast<double>(options_.total_steps - warmup);
  return r + (1.0 - r) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace strata::optim
