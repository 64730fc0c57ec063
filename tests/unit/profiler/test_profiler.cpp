// profiler::Session and Scope on the CPU: off by default, exact call counts and nesting for a
// known sequence of ops and backward nodes, self <= total host time, bytes allocated, the
// table's order and columns, the timeline spans, and the refusals (a second session, a
// session never read or still open at exit).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>

#include "strata/autograd/grad_mode.h"
#include "strata/ops.h"
#include "strata/profile/profiler_spans.h"
#include "strata/profiler/profiler.h"
#include "strata/tensor/factory.h"

using namespace strata;

namespace {

std::map<std::string, profiler::Row> by_name(const std::vector<profiler::Row>& rows) {
  std::map<std::string, profiler::Row> out;
  for (const auto& r : rows) out[r.name] = r;
  return out;
}

// 3 matmuls and 2 adds: x [4, 8] @ w1 [8, 8] @ w2 [8, 8] @ w3 [8, 16], + b twice.
Tensor three_matmuls_two_adds(const Tensor& x, const Tensor& w, const Tensor& w3, const Tensor& b) {
  Tensor h = matmul(matmul(x, w), w);
  return add(add(matmul(h, w3), b), b);
}

struct Inputs {
  Tensor x = randn({4, 8});
  Tensor w = randn({8, 8});
  Tensor w3 = randn({8, 16});
  Tensor b = randn({16});
};

}  // namespace

TEST(Profiler, OffByDefaultRecordsNothing) {
  EXPECT_FALSE(profiler::recording());
  Inputs in;
  {
    profiler::Scope region("before the session");
    (void)three_matmuls_two_adds(in.x, in.w, in.w3, in.b);
  }
  profiler::Session session;  // started after the ops: none of them is in it
  EXPECT_TRUE(profiler::recording());
  EXPECT_TRUE(session.rows().empty());
  EXPECT_FALSE(profiler::recording());  // rows() stopped it
}

TEST(Profiler, CountsEachOpOnceInItsOwnRow) {
  Inputs in;
  profiler::Session session;
  {
    NoGradGuard no_grad;
    (void)three_matmuls_two_adds(in.x, in.w, in.w3, in.b);
  }
  const auto rows = by_name(session.rows());
  ASSERT_TRUE(rows.count("matmul") && rows.count("add")) << session.table();
  EXPECT_EQ(rows.at("matmul").calls, 3);
  EXPECT_EQ(rows.at("add").calls, 2);
  for (const auto& [name, r] : rows) {
    EXPECT_GE(r.host_self_ms, 0) << name;
    EXPECT_LE(r.host_self_ms, r.host_total_ms) << name;
    EXPECT_FALSE(r.has_device_time) << name;  // all on the CPU
    EXPECT_EQ(r.launches, 0) << name;
  }
  // Each matmul allocates at least its output: [4, 8], [4, 8], [4, 16] floats.
  EXPECT_GE(rows.at("matmul").bytes_allocated, (32 + 32 + 64) * 4);
}

TEST(Profiler, BackwardNodesNestTheirOps) {
  Inputs in;
  for (Tensor* t : {&in.w, &in.w3}) t->set_requires_grad(true);
  profiler::Session session;
  Tensor loss = three_matmuls_two_adds(in.x, in.w, in.w3, in.b).sum();
  loss.backward();
  const auto spans = session.spans();
  const auto rows = by_name(session.rows());
  ASSERT_TRUE(rows.count("MatmulBackward") && rows.count("AddBackward")) << session.table();
  EXPECT_EQ(rows.at("MatmulBackward").calls, 3);
  EXPECT_EQ(rows.at("AddBackward").calls, 2);
  int backward_seen = 0;
  for (const auto& parent : spans) {
    if (parent.name != "MatmulBackward") continue;
    ++backward_seen;
    int64_t children_ns = 0;
    int matmuls = 0;
    for (const auto& child : spans) {
      if (child.depth != parent.depth + 1 || child.begin_ns < parent.begin_ns || child.end_ns > parent.end_ns) continue;
      children_ns += child.end_ns - child.begin_ns;
      matmuls += child.name == "matmul";
    }
    EXPECT_GE(parent.end_ns - parent.begin_ns, children_ns);  // a parent's total >= its children's
    EXPECT_GE(matmuls, 1);  // dW = x^T dY at least (x needs no gradient at the first matmul)
  }
  EXPECT_EQ(backward_seen, 3);
  // Self time is the total less the recorded children, so it is below the total for a
  // backward node (its matmuls are children) and self + children adds up to total.
  const auto& mb = rows.at("MatmulBackward");
  EXPECT_LT(mb.host_self_ms, mb.host_total_ms);
  // Forward 3 + backward: each of the 3 nodes runs 1 or 2 matmuls (x needs no gradient).
  EXPECT_GE(rows.at("matmul").calls, 3 + 3);
  EXPECT_LE(rows.at("matmul").calls, 3 + 6);
}

TEST(Profiler, CountsBytesAllocatedInAUserRegion) {
  profiler::Session session;
  {
    profiler::Scope region("region");
    Tensor t = empty({1000}, {.dtype = DType::Float32});
    Tensor u = empty({10}, {.dtype = DType::Float64});
  }
  const auto rows = by_name(session.rows());
  ASSERT_TRUE(rows.count("region"));
  EXPECT_EQ(rows.at("region").calls, 1);
  EXPECT_EQ(rows.at("region").bytes_allocated, 1000 * 4 + 10 * 8);
}

TEST(Profiler, TableIsSortedAndNamesTheColumns) {
  Inputs in;
  profiler::Session session;
  {
    profiler::Scope outer("outer region");  // contains everything: the largest host total
    (void)three_matmuls_two_adds(in.x, in.w, in.w3, in.b);
  }
  const auto rows = session.rows();
  ASSERT_GE(rows.size(), 3u);
  EXPECT_EQ(rows.front().name, "outer region");
  for (size_t i = 1; i < rows.size(); ++i) EXPECT_GE(rows[i - 1].host_total_ms, rows[i].host_total_ms);
  const std::string table = session.table();
  for (const char* column : {"Name", "Calls", "Host total ms", "Host self ms", "Device ms", "Launches", "Allocated"})
    EXPECT_NE(table.find(column), std::string::npos) << column << " missing from\n" << table;
  size_t last = 0;
  for (const auto& r : rows) {  // the table lists the rows in the same order
    const size_t at = table.find("\n" + r.name + " ");
    ASSERT_NE(at, std::string::npos) << r.name;
    EXPECT_GT(at, last) << r.name;
    last = at;
  }
}

TEST(Profiler, SecondSessionIsRefusedWhileOneRecords) {
  profiler::Session first;
  try {
    profiler::Session second;
    FAIL() << "a second session started";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("another session is already recording"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(first.is_recording());
  first.stop();
  profiler::Session third;  // allowed once the first stopped
  EXPECT_TRUE(third.is_recording());
  (void)first.rows();
  (void)third.rows();
}

TEST(Profiler, SpansGoOntoTheTimeline) {
  Inputs in;
  profiler::Session session;
  (void)matmul(in.x, in.w);
  profile::Timeline timeline;
  timeline.start_recording();
  profile::add_profiler_spans(timeline, session.spans());
  ASSERT_EQ(timeline.events().size(), 1u);
  const auto& e = timeline.events()[0];
  EXPECT_EQ(e.name, "matmul");
  EXPECT_EQ(e.category, "op");
  EXPECT_LE(e.begin_ns, e.end_ns);
  const std::string json = timeline.to_json(0);
  EXPECT_NE(json.find("\"name\":\"matmul\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"cat\":\"op\""), std::string::npos) << json;
}

TEST(Profiler, UnreadSessionPrintsItsTableWhenDestroyed) {
  Inputs in;
  ::testing::internal::CaptureStderr();
  {
    profiler::Session session;
    (void)matmul(in.x, in.w);
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("ended without its results being read"), std::string::npos) << err;
  EXPECT_NE(err.find("\nmatmul "), std::string::npos) << err;
}

TEST(Profiler, SessionStillRecordingAtExitPrintsItsTable) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        Inputs in;
        new profiler::Session();  // leaked on purpose: never stopped, never destroyed
        (void)matmul(in.x, in.w);
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "still recording at exit(.|\n)*matmul");
}
