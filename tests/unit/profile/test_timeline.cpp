// profile::Timeline on one process: nothing recorded unless recording, spans nest, moves and
// end() record once, and the Chrome-trace JSON follows the trace-event format.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "strata/profile/timeline.h"
#include "timeline_check.h"

using namespace strata;

TEST(Timeline, RecordsOnlyWhileRecording) {
  profile::Timeline t;
  { auto s = t.span("forward", "compute"); }
  { auto s = profile::Timeline::span(nullptr, "forward", "compute"); }
  EXPECT_TRUE(t.events().empty());
  t.start_recording();
  { auto s = t.span("forward", "compute"); }
  t.stop_recording();
  { auto s = t.span("backward", "compute"); }
  ASSERT_EQ(t.events().size(), 1u);
  EXPECT_EQ(t.events()[0].name, "forward");
  t.start_recording();  // a new recording drops the old events
  EXPECT_TRUE(t.events().empty());
}

TEST(Timeline, SpansNestAndCarryTheirArguments) {
  profile::Timeline t;
  t.start_recording();
  {
    auto step = t.span("step", "step", {{"step", 7}});
    for (int mb = 0; mb < 2; ++mb) {
      auto f = t.span("forward", "compute", {{"micro_batch", mb}});
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    profile::Timeline::Span moved = t.span("send", "comm", {{"bytes", 4096}});
    profile::Timeline::Span target;
    target = std::move(moved);
    target.end();
    target.end();  // once only
  }
  ASSERT_EQ(t.events().size(), 4u);  // 2 forwards, the send, then the step (closed last)
  const auto& step = t.events().back();
  EXPECT_EQ(step.name, "step");
  for (size_t i = 0; i + 1 < t.events().size(); ++i) {
    EXPECT_LE(step.begin_ns, t.events()[i].begin_ns);
    EXPECT_GE(step.end_ns, t.events()[i].end_ns);
  }
  const auto by_pid = strata::testing::check_chrome_trace(t.to_json(3));
  ASSERT_EQ(by_pid.count(3), 1u);
  const auto& events = by_pid.at(3);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0]["name"], "forward");
  EXPECT_EQ(events[0]["args"]["micro_batch"], 0);
  EXPECT_EQ(events[1]["args"]["micro_batch"], 1);
  EXPECT_EQ(events[2]["args"]["bytes"], 4096);
  EXPECT_EQ(events[3]["args"]["step"], 7);
  EXPECT_GE(events[0]["dur"].template get<double>(), 150.0);  // microseconds
}

TEST(Timeline, MovesTransferTheRecord) {
  profile::Timeline t;
  t.start_recording();
  {
    profile::Timeline::Span a = t.span("a", "compute");
    profile::Timeline::Span b(std::move(a));
    a.end();  // moved from: records nothing
    EXPECT_TRUE(t.events().empty());
    profile::Timeline::Span c = t.span("c", "compute");
    c = std::move(b);  // c's own span ("c") is recorded first, then c holds "a"
    ASSERT_EQ(t.events().size(), 1u);
    EXPECT_EQ(t.events()[0].name, "c");
    b.end();
  }
  ASSERT_EQ(t.events().size(), 2u);
  EXPECT_EQ(t.events()[1].name, "a");
  EXPECT_LE(t.events()[1].begin_ns, t.events()[1].end_ns);
}

TEST(Timeline, SpansOpenedWhileRecordingAreKeptAddedEventsOnlyWhileRecording) {
  profile::Timeline t;
  t.add({"early", "comm", 1, 2, {}});  // not recording
  t.start_recording();
  auto step = t.span("step", "step");
  t.add({"measured", "comm", 10, 20, {{"bytes", 8}}});
  t.stop_recording();
  t.add({"late", "comm", 30, 40, {}});
  { auto s = t.span("after", "compute"); }  // opened after stop_recording
  step.end();                               // opened before: kept
  ASSERT_EQ(t.events().size(), 2u);
  EXPECT_EQ(t.events()[0].name, "measured");
  EXPECT_EQ(t.events()[0].args, (profile::Timeline::Args{{"bytes", 8}}));
  EXPECT_EQ(t.events()[1].name, "step");
}

// Exact times (add() with known nanoseconds): microseconds from the earliest begin, as the
// trace-event format has them, and a named, sorted process for the rank.
TEST(Timeline, JsonHasMicrosecondTimesAndProcessMetadata) {
  profile::Timeline t;
  t.start_recording();
  const int64_t t0 = 1'700'000'000'000'000'000;
  t.add({"outer", "step", t0 + 1000, t0 + 9500, {{"step", 2}, {"micro_batch", -1}}});
  t.add({"inner", "comm", t0 + 1500, t0 + 2000, {}});
  t.add({"reversed", "comm", t0 + 3000, t0 + 2000, {}});  // end before begin: duration 0
  const nlohmann::json trace = nlohmann::json::parse(t.to_json(5));
  EXPECT_EQ(trace["displayTimeUnit"], "ms");
  std::vector<nlohmann::json> metadata, complete;
  for (const auto& e : trace["traceEvents"]) (e["ph"] == "M" ? metadata : complete).push_back(e);
  ASSERT_EQ(metadata.size(), 2u);
  for (const auto& m : metadata) {
    EXPECT_EQ(m["pid"], 5);
    if (m["name"] == "process_name") {
      EXPECT_EQ(m["args"]["name"], "rank 5");
    } else {
      EXPECT_EQ(m["name"], "process_sort_index");
      EXPECT_EQ(m["args"]["sort_index"], 5);
    }
  }
  ASSERT_EQ(complete.size(), 3u);
  EXPECT_EQ(complete[0]["name"], "outer");
  EXPECT_EQ(complete[0]["cat"], "step");
  EXPECT_EQ(complete[0]["pid"], 5);
  EXPECT_EQ(complete[0]["tid"], 0);
  EXPECT_DOUBLE_EQ(complete[0]["ts"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(complete[0]["dur"].get<double>(), 8.5);
  EXPECT_EQ(complete[0]["args"]["step"], 2);
  EXPECT_EQ(complete[0]["args"]["micro_batch"], -1);
  EXPECT_DOUBLE_EQ(complete[1]["ts"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(complete[1]["dur"].get<double>(), 0.5);
  EXPECT_TRUE(complete[1]["args"].is_object() && complete[1]["args"].empty());
  EXPECT_DOUBLE_EQ(complete[2]["dur"].get<double>(), 0.0);
  strata::testing::check_chrome_trace(t.to_json(5));
}

TEST(Timeline, EmptyAndOddlyNamedTimelinesStillGiveValidJson) {
  profile::Timeline t;
  const auto empty = strata::testing::check_chrome_trace(t.to_json(0));
  EXPECT_TRUE(empty.empty());
  t.start_recording();
  // Invalid UTF-8 and characters JSON must escape: replaced and escaped, never thrown on
  // (a throw inside write() on one rank would strand the others in its collectives).
  t.add({std::string("bad \xff name \"quoted\"\n"), "comm", 0, 1, {{"k\"ey", 1}}});
  const auto by_pid = strata::testing::check_chrome_trace(t.to_json(0));
  ASSERT_EQ(by_pid.at(0).size(), 1u);
  EXPECT_NE(by_pid.at(0)[0]["name"].get<std::string>().find("\"quoted\""), std::string::npos);
  EXPECT_EQ(by_pid.at(0)[0]["args"]["k\"ey"], 1);
}

// The nesting check itself: overlapping spans on one thread fail; on two pids they do not.
TEST(Timeline, TraceCheckRejectsOverlappingSpans) {
  auto trace = [](int pid_b) {
    nlohmann::json events = nlohmann::json::array();
    const auto span = [](const char* name, double ts, int pid) {
      return nlohmann::json{{"ph", "X"},   {"name", name}, {"cat", "c"}, {"ts", ts},
                            {"dur", 10.0}, {"pid", pid},   {"tid", 0}};
    };
    events.push_back(span("a", 0.0, 0));
    events.push_back(span("b", 5.0, pid_b));
    return nlohmann::json{{"traceEvents", events}}.dump();
  };
  EXPECT_NONFATAL_FAILURE(strata::testing::check_chrome_trace(trace(0)), "overlap on pid 0");
  EXPECT_EQ(strata::testing::check_chrome_trace(trace(1)).size(), 2u);
  const std::string missing = R"({"traceEvents": [{"ph": "X", "name": "a", "ts": 0, "dur": 1, "pid": 0, "tid": 0}]})";
  EXPECT_NONFATAL_FAILURE(strata::testing::check_chrome_trace(missing), "cat");
}
