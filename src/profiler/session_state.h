#pragma once
// Private to profiler/: what a session records (profiler.cpp) and how it is summed and
// printed (profiler_table.cpp).
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "strata/profiler/profiler.h"

namespace strata::profiler::detail {

// One call that ended while its session recorded.
struct Record {
  std::string name;
  int64_t begin_ns = 0;  // system_clock
  int64_t end_ns = 0;
  int64_t self_ns = 0;  // host time less the recorded children's
  int depth = 0;
  int64_t launches = 0;
  int64_t bytes = 0;
  void* event_begin = nullptr;  // CUDA events (null on the CPU); destroyed by the state
  void* event_end = nullptr;
  float device_ms = -1;  // resolved from the events; -1: none
};

struct SessionState {
  std::mutex mutex;  // guards everything below (scopes end on any thread)
  bool recording = true;
  bool results_read = false;
  bool device_resolved = false;
  int64_t steady_origin_ns = 0;  // the clocks at the start: spans are timed on the steady
  int64_t system_origin_ns = 0;  // clock and placed on the system clock (Timeline's)
  std::vector<Record> records;

  SessionState() = default;
  SessionState(const SessionState&) = delete;
  SessionState& operator=(const SessionState&) = delete;
  ~SessionState();
};

// Waits for the device once per pending span and fills device_ms (caller holds the mutex).
void resolve_device_times(SessionState& state);
// Per-name totals, sorted by device time then host time, descending (caller holds the mutex).
std::vector<Row> sum_by_name(const SessionState& state);
// The rows as a fixed-width table with a header line naming the columns.
std::string format_table(const std::vector<Row>& rows);

}  // namespace strata::profiler::detail
