#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace strata::train {

// The one-line progress report of a training loop:
//   step  120/2000 | loss 1.2345 | lr 3.00e-04 | 45.2k tok/s | 38.1% MFU | ETA 1m52s
// Throughput and ETA use the time since construction (or the last reset_clock), so a
// resumed run reports its own speed.
class Progress {
 public:
  Progress(int64_t total_steps, int64_t tokens_per_step, double flops_per_step = 0, double peak_flops = 0);
  // Returns the formatted line for `step` (0-based steps completed so far = step + 1).
  std::string line(int64_t step, double loss, double lr);
  void reset_clock(int64_t step);
  double tokens_per_second(int64_t step) const;

 private:
  int64_t total_steps_;
  int64_t tokens_per_step_;
  double flops_per_step_;
  double peak_flops_;
  int64_t first_step_ = 0;
  std::chrono::steady_clock::time_point start_;
};

std::string format_duration(double seconds);  // "1h02m", "3m05s", "12.3s"

}  // namespace strata::train
