#pragma once
// Small timing helpers shared by the benchmarks (header-only: each benchmark is one file).
#include <algorithm>
#include <chrono>
#include <vector>

namespace strata::bench {

using Clock = std::chrono::steady_clock;

// The middle value (upper median for an even count); 0 for no samples.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

inline double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace strata::bench
