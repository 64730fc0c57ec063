// A session's records summed per name and printed as a table (torch.profiler's
// key_averages().table(): name, calls, host total and self, device time, launches, bytes).
#include <algorithm>
#include <cstdio>
#include <map>

#include "profiler/device_events.h"
#include "profiler/session_state.h"

namespace strata::profiler::detail {
namespace {

constexpr size_t kMaxNameWidth = 48;  // longer names are cut (with "...") to keep columns aligned

std::string format(const char* fmt, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, value);
  return buf;
}

std::string bytes_text(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  size_t u = 0;
  while (v >= 1024 && u + 1 < std::size(units)) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? std::to_string(bytes) + " B" : format("%.2f ", v) + units[u];
}

std::string fit(std::string name) {
  if (name.size() > kMaxNameWidth) name = name.substr(0, kMaxNameWidth - 3) + "...";
  return name;
}

}  // namespace

void resolve_device_times(SessionState& state) {
  if (state.device_resolved) return;
  state.device_resolved = true;
  for (Record& r : state.records) {
    if (r.event_begin == nullptr || r.event_end == nullptr) continue;
    r.device_ms = device_elapsed_ms(r.event_begin, r.event_end);
  }
}

std::vector<Row> sum_by_name(const SessionState& state) {
  std::map<std::string, Row> by_name;
  for (const Record& r : state.records) {
    Row& row = by_name[r.name];
    row.name = r.name;
    ++row.calls;
    row.host_total_ms += static_cast<double>(r.end_ns - r.begin_ns) / 1e6;
    row.host_self_ms += static_cast<double>(r.self_ns) / 1e6;
    if (r.device_ms >= 0) {
      row.device_ms += r.device_ms;
      row.has_device_time = true;
    }
    row.launches += r.launches;
    row.bytes_allocated += r.bytes;
  }
  std::vector<Row> rows;
  rows.reserve(by_name.size());
  for (auto& [name, row] : by_name) rows.push_back(std::move(row));
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    if (a.device_ms != b.device_ms) return a.device_ms > b.device_ms;
    return a.host_total_ms > b.host_total_ms;
  });
  return rows;
}

std::string format_table(const std::vector<Row>& rows) {
  size_t width = 4;
  for (const Row& r : rows) width = std::max(width, fit(r.name).size());
  const int w = static_cast<int>(width);
  char line[512];
  std::snprintf(line, sizeof line, "%-*s %8s %14s %13s %11s %9s %12s\n", w, "Name", "Calls", "Host total ms",
                "Host self ms", "Device ms", "Launches", "Allocated");
  std::string out = line;
  out += std::string(width + 74, '-') + "\n";
  double host_self = 0;
  for (const Row& r : rows) {
    const std::string dev = r.has_device_time ? format("%.3f", r.device_ms) : "-";
    std::snprintf(line, sizeof line, "%-*s %8lld %14.3f %13.3f %11s %9lld %12s\n", w, fit(r.name).c_str(),
                  static_cast<long long>(r.calls), r.host_total_ms, r.host_self_ms, dev.c_str(),
                  static_cast<long long>(r.launches), bytes_text(r.bytes_allocated).c_str());
    out += line;
    host_self += r.host_self_ms;
  }
  std::snprintf(line, sizeof line, "%zu names; host self time in all: %.3f ms\n", rows.size(), host_self);
  out += line;
  return out;
}

}  // namespace strata::profiler::detail
