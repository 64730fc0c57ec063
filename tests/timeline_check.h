#pragma once
// Checks a Chrome-trace JSON (profile::Timeline's output) the way a viewer reads it: a
// traceEvents array whose complete ("X") events carry name, cat, ts >= 0, dur >= 0, pid and
// tid, and whose spans on one (pid, tid) nest: any two are disjoint or one contains the other.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace strata::testing {

// Returns the X events by pid; a failed expectation names the offending event.
inline std::map<int, std::vector<nlohmann::json>> check_chrome_trace(const std::string& text) {
  std::map<int, std::vector<nlohmann::json>> by_pid;
  const nlohmann::json trace = nlohmann::json::parse(text);
  EXPECT_TRUE(trace.contains("traceEvents") && trace["traceEvents"].is_array());
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> spans;
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("ph", "") != "X") continue;
    for (const char* key : {"name", "cat", "ts", "dur", "pid", "tid"})
      EXPECT_TRUE(e.contains(key)) << key << " in " << e.dump();
    EXPECT_GE(e["ts"].get<double>(), 0.0) << e.dump();
    EXPECT_GE(e["dur"].get<double>(), 0.0) << e.dump();
    by_pid[e["pid"].get<int>()].push_back(e);
    spans[{e["pid"].get<int>(), e["tid"].get<int>()}].emplace_back(e["ts"].get<double>(),
                                                                   e["ts"].get<double>() + e["dur"].get<double>());
  }
  const double slack = 1e-3;  // microseconds: the JSON's rounding
  for (auto& [thread, list] : spans) {
    for (size_t i = 0; i < list.size(); ++i) {
      for (size_t j = i + 1; j < list.size(); ++j) {
        const auto [a0, a1] = list[i];
        const auto [b0, b1] = list[j];
        const bool disjoint = a1 <= b0 + slack || b1 <= a0 + slack;
        const bool nested = (a0 <= b0 + slack && b1 <= a1 + slack) || (b0 <= a0 + slack && a1 <= b1 + slack);
        EXPECT_TRUE(disjoint || nested) << "spans [" << a0 << ", " << a1 << "] and [" << b0 << ", " << b1
                                        << "] overlap on pid " << thread.first;
      }
    }
  }
  return by_pid;
}

}  // namespace strata::testing
