#include "strata/profile/timeline.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "strata/checkpoint/atomic_file.h"
#include "strata/core/error.h"
#include "strata/distributed/object_collectives.h"
#include "strata/tensor/factory.h"

namespace strata::profile {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Names are caller text; invalid UTF-8 is replaced rather than thrown on, because a throw on
// one rank before write()'s collectives would leave the others waiting for it.
std::string dump(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Events as compact JSON rows (what ranks send to rank 0): [name, category, begin, end, {args}].
nlohmann::json rows_of(const std::vector<Timeline::Event>& events) {
  nlohmann::json rows = nlohmann::json::array();
  for (const Timeline::Event& e : events) {
    nlohmann::json args = nlohmann::json::object();
    for (const auto& [key, value] : e.args) args[key] = value;
    rows.push_back({e.name, e.category, e.begin_ns, e.end_ns, args});
  }
  return rows;
}

// The Chrome trace of every rank's rows (by pid): metadata naming each process, then one
// complete event per span, timestamps in microseconds from the earliest begin.
std::string chrome_trace(const std::vector<std::pair<int, nlohmann::json>>& ranks) {
  int64_t origin = std::numeric_limits<int64_t>::max();
  for (const auto& [pid, rows] : ranks)
    for (const auto& row : rows) origin = std::min(origin, row[2].get<int64_t>());
  nlohmann::json events = nlohmann::json::array();
  for (const auto& [pid, rows] : ranks) {
    events.push_back({{"ph", "M"},
                      {"name", "process_name"},
                      {"pid", pid},
                      {"tid", 0},
                      {"args", {{"name", "rank " + std::to_string(pid)}}}});
    events.push_back(
        {{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid}, {"tid", 0}, {"args", {{"sort_index", pid}}}});
    for (const auto& row : rows) {
      const int64_t begin = row[2].get<int64_t>(), end = row[3].get<int64_t>();
      events.push_back({{"ph", "X"},
                        {"name", row[0]},
                        {"cat", row[1]},
                        {"pid", pid},
                        {"tid", 0},
                        {"ts", static_cast<double>(begin - origin) / 1e3},
                        {"dur", static_cast<double>(std::max<int64_t>(end - begin, 0)) / 1e3},
                        {"args", row[4]}});
    }
  }
  return dump(nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}});
}

}  // namespace

Timeline::Span::Span(Span&& other) noexcept : timeline_(other.timeline_), event_(std::move(other.event_)) {
  other.timeline_ = nullptr;
}

Timeline::Span& Timeline::Span::operator=(Span&& other) noexcept {
  if (this != &other) {
    end();
    timeline_ = other.timeline_;
    event_ = std::move(other.event_);
    other.timeline_ = nullptr;
  }
  return *this;
}

Timeline::Span::~Span() { end(); }

// Straight into the events, not through add(): a span opened while recording is kept even
// when it closes after stop_recording() (the header's contract), so the outermost span of a
// step is not lost when recording stops inside it.
void Timeline::Span::end() {
  if (timeline_ == nullptr) return;
  event_.end_ns = now_ns();
  timeline_->events_.push_back(std::move(event_));
  timeline_ = nullptr;
}

void Timeline::start_recording() {
  events_.clear();
  recording_ = true;
}

void Timeline::stop_recording() { recording_ = false; }

Timeline::Span Timeline::span(std::string name, std::string category, Args args) {
  Span s;
  if (!recording_) return s;
  s.timeline_ = this;
  s.event_ = {std::move(name), std::move(category), now_ns(), 0, std::move(args)};
  return s;
}

Timeline::Span Timeline::span(Timeline* timeline, std::string name, std::string category, Args args) {
  if (timeline == nullptr) return Span();
  return timeline->span(std::move(name), std::move(category), std::move(args));
}

void Timeline::add(Event event) {
  if (recording_) events_.push_back(std::move(event));
}

std::string Timeline::to_json(int rank) const { return chrome_trace({{rank, rows_of(events_)}}); }

void Timeline::write(dist::ProcessGroup& group, const std::string& path) const {
  const std::vector<std::string> texts = dist::all_gather_strings(group, dump(rows_of(events_)));
  if (group.rank() != 0) return;
  std::vector<std::pair<int, nlohmann::json>> ranks;
  for (size_t r = 0; r < texts.size(); ++r)
    ranks.emplace_back(group.global_ranks()[r], nlohmann::json::parse(texts[r]));
  try {
    checkpoint::write_file_atomic(path, chrome_trace(ranks));
  } catch (const std::exception& e) {
    throw Error("Timeline::write: cannot write the timeline '" + path + "': " + e.what());
  }
}

}  // namespace strata::profile
