#include "strata/train/progress.h"

#include <cmath>
#include <cstdio>

namespace strata::train {

Progress::Progress(int64_t total_steps, int64_t tokens_per_step, double flops_per_step, double peak_flops)
    : total_steps_(total_steps),
      tokens_per_step_(tokens_per_step),
      flops_per_step_(flops_per_step),
      peak_flops_(peak_flops),
      start_(std::chrono::steady_clock::now()) {}

void Progress::reset_clock(int64_t step) {
  first_step_ = step;
  start_ = std::chrono::steady_clock::now();
}

double Progress::tokens_per_second(int64_t step) const {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double steps = static_cast<double>(step + 1 - first_step_);
  return elapsed > 0 ? steps * static_cast<double>(tokens_per_step_) / elapsed : 0.0;
}

std::string format_duration(double seconds) {
  char buf[32];
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  if (seconds < 60) {
    std::snprintf(buf, sizeof buf, "%.1fs", seconds);
  } else if (seconds < 3600) {
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(seconds) / 60, static_cast<int>(seconds) % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(seconds) / 3600, static_cast<int>(seconds) / 60 % 60);
  }
  return buf;
}

std::string Progress::line(int64_t step, double loss, double lr) {
  const double tps = tokens_per_second(step);
  const double steps_left = static_cast<double>(total_steps_ - step - 1);
  const double eta = tps > 0 ? steps_left * static_cast<double>(tokens_per_step_) / tps : NAN;
  char buf[256];
  int n = std::snprintf(buf, sizeof buf, "step %*lld/%lld | loss %.4f | lr %.2e | %.1fk tok/s",
                        static_cast<int>(std::to_string(total_steps_).size()), static_cast<long long>(step + 1),
                        static_cast<long long>(total_steps_), loss, lr, tps / 1000.0);
  std::string out(buf, static_cast<size_t>(n));
  if (flops_per_step_ > 0 && peak_flops_ > 0) {
    const double achieved = tps / static_cast<double>(tokens_per_step_) * flops_per_step_;
    std::snprintf(buf, sizeof buf, " | %.1f GFLOP/s (%.0f%% of sgemm)", achieved / 1e9, 100.0 * achieved / peak_flops_);
    out += buf;
  }
  out += " | ETA " + format_duration(eta);
  return out;
}

}  // namespace strata::train
