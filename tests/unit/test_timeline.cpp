// train::Timeline on one process: nothing recorded unless recording, spans nest, moves and
// end() record once, and the Chrome-trace JSON follows the trace-event format.
#include <gtest/gtest.h>

#include <thread>

#include "strata/train/timeline.h"
#include "timeline_check.h"

using namespace strata;

TEST(Timeline, RecordsOnlyWhileRecording) {
  train::Timeline t;
  { auto s = t.span("forward", "compute"); }
  { auto s = train::Timeline::span(nullptr, "forward", "compute"); }
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
  train::Timeline t;
  t.start_recording();
  {
    auto step = t.span("step", "step", {{"step", 7}});
    for (int mb = 0; mb < 2; ++mb) {
      auto f = t.span("forward", "compute", {{"micro_batch", mb}});
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    train::Timeline::Span moved = t.span("send", "comm", {{"bytes", 4096}});
    train::Timeline::Span target;
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
