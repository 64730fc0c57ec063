// profile::Timeline::write across ranks: payloads of different lengths gathered into one
// Chrome-trace file on group rank 0, processes named by global rank, a rank with no events,
// and a path that cannot be written (rank 0 fails naming it, the others return, and the
// group stays in step).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "distributed/dist_test_util.h"
#include "file_test_util.h"
#include "strata/profile/timeline.h"
#include "timeline_check.h"

using namespace strata;
namespace fs = std::filesystem;
namespace st = strata::testing;  // plain `testing` would also name gtest's

namespace {

// A directory every rank names alike (rank 0's pid), created and removed by rank 0: only
// group rank 0 writes, but every rank passes the same path, as a training script does.
class SharedDir {
 public:
  SharedDir() {
    auto& world = dist::world();
    Tensor pid = full({1}, static_cast<double>(::getpid()), {.dtype = DType::Int64});
    world.broadcast(pid, 0)->wait();
    path_ = fs::temp_directory_path() / ("strata_timeline_" + std::to_string(static_cast<int64_t>(pid.item())));
    if (world.rank() == 0) fs::create_directories(path_);
    world.barrier()->wait();
  }
  ~SharedDir() {
    dist::world().barrier()->wait();
    std::error_code ec;
    if (dist::world().rank() == 0) fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

int64_t big_arg(int rank, int i) { return (int64_t{1} << 40) + 1000 * rank + i; }  // beyond 32 bits
int forwards_on(int rank) { return 2 + 3 * rank; }                                 // unequal payloads

// Rank r's spans: a step holding forwards_on(r) forwards (with distinct args) and a
// rank-specific name, plus one event measured elsewhere (add) inside the step.
void record(profile::Timeline& t, int rank) {
  t.start_recording();
  {
    auto step = t.span("step", "step", {{"step", 100 + rank}});
    for (int i = 0; i < forwards_on(rank); ++i) {
      auto f = t.span("forward", "compute", {{"micro_batch", i}, {"tag", big_arg(rank, i)}});
    }
    const std::string only_name =
        "only on rank " + std::to_string(rank) + std::string(static_cast<size_t>(rank) * 40, '+');
    { auto only = t.span(only_name, "comm"); }
    const int64_t now = t.events().back().end_ns;
    t.add({"measured", "comm", now, now, {{"bytes", 4096 * (rank + 1)}}});
  }
  t.stop_recording();
}

std::map<std::string, std::string> metadata_by_pid(const nlohmann::json& trace, const std::string& name) {
  std::map<std::string, std::string> out;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "M" || e["name"] != name) continue;
    out[std::to_string(e["pid"].get<int>())] = e["args"].dump();
  }
  return out;
}

}  // namespace

TEST(TimelineDist, GathersEveryRanksEventsIntoOneFile) {
  auto& world = dist::world();
  const int n = world.size();
  SharedDir dir;
  const std::string path = dir.file("trace.json");
  if (world.rank() == 0) st::write_bytes(path, "stale");  // replaced whole
  profile::Timeline t;
  record(t, world.rank());
  t.write(world, path);
  if (world.rank() != 0) return;

  const std::string text = st::read_bytes(path);
  const auto by_pid = st::check_chrome_trace(text);  // format and nesting, per rank
  const nlohmann::json trace = nlohmann::json::parse(text);
  EXPECT_EQ(trace["displayTimeUnit"], "ms");
  // One process per rank, named and sorted by its global rank.
  const auto names = metadata_by_pid(trace, "process_name");
  const auto sort = metadata_by_pid(trace, "process_sort_index");
  ASSERT_EQ(static_cast<int>(names.size()), n);
  ASSERT_EQ(static_cast<int>(sort.size()), n);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(names.at(std::to_string(r)), nlohmann::json({{"name", "rank " + std::to_string(r)}}).dump());
    EXPECT_EQ(sort.at(std::to_string(r)), nlohmann::json({{"sort_index", r}}).dump());
  }
  // Every event of every rank, with its own names and args, in the order it closed.
  ASSERT_EQ(static_cast<int>(by_pid.size()), n);
  double earliest = 1e300;
  for (int r = 0; r < n; ++r) {
    const auto& events = by_pid.at(r);
    ASSERT_EQ(static_cast<int>(events.size()), forwards_on(r) + 3) << "rank " << r;
    for (int i = 0; i < forwards_on(r); ++i) {
      const auto& f = events[static_cast<size_t>(i)];
      EXPECT_EQ(f["name"], "forward");
      EXPECT_EQ(f["cat"], "compute");
      EXPECT_EQ(f["tid"], 0);
      EXPECT_EQ(f["args"]["micro_batch"], i);
      EXPECT_EQ(f["args"]["tag"].get<int64_t>(), big_arg(r, i));
    }
    const auto& only = events[static_cast<size_t>(forwards_on(r))];
    EXPECT_EQ(only["name"].get<std::string>().rfind("only on rank " + std::to_string(r), 0), 0u) << only.dump();
    EXPECT_EQ(only["name"].get<std::string>().size(), 13 + std::to_string(r).size() + 40 * static_cast<size_t>(r));
    const auto& measured = events[static_cast<size_t>(forwards_on(r)) + 1];
    EXPECT_EQ(measured["name"], "measured");
    EXPECT_EQ(measured["args"]["bytes"], 4096 * (r + 1));
    EXPECT_DOUBLE_EQ(measured["dur"].get<double>(), 0.0);
    const auto& step = events.back();
    EXPECT_EQ(step["name"], "step");
    EXPECT_EQ(step["args"]["step"], 100 + r);
    for (const auto& e : events) {  // inside the step
      EXPECT_GE(e["ts"].get<double>(), step["ts"].get<double>() - 1e-3);
      EXPECT_LE(e["ts"].get<double>() + e["dur"].get<double>(),
                step["ts"].get<double>() + step["dur"].get<double>() + 1e-3);
      earliest = std::min(earliest, e["ts"].get<double>());
    }
  }
  EXPECT_EQ(earliest, 0.0);  // counted from the earliest event of any rank

  // The file was replaced atomically: no temporary left beside it.
  std::vector<std::string> entries;
  for (const auto& e : fs::directory_iterator(dir.path())) entries.push_back(e.path().filename().string());
  EXPECT_EQ(entries, std::vector<std::string>{"trace.json"});

  // What a viewer's JSON parser makes of it (another implementation than nlohmann's).
  if (fs::exists(st::kPython)) {
    const std::string script =
        "import json,sys\n"
        "t = json.load(open(sys.argv[1]))\n"
        "x = [e for e in t['traceEvents'] if e['ph'] == 'X']\n"
        "assert all(isinstance(e['ts'], (int, float)) and isinstance(e['dur'], (int, float)) for e in x)\n"
        "print(len({e['pid'] for e in x}), len(x))\n";
    std::string cmd =
        std::string(st::kPython) + " -c " + st::shell_quote(script) + " " + st::shell_quote(path) + " 2>&1";
    FILE* pipe = ::popen(cmd.c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    std::string out;
    char buf[256];
    while (std::fgets(buf, sizeof buf, pipe) != nullptr) out += buf;
    EXPECT_EQ(::pclose(pipe), 0) << out;
    int total = 0;
    for (int r = 0; r < n; ++r) total += forwards_on(r) + 3;
    EXPECT_EQ(out, std::to_string(n) + " " + std::to_string(total) + "\n");
  }
}

// A rank that recorded nothing still appears as a process, without events.
TEST(TimelineDist, RanksWithoutEventsStillHaveAProcess) {
  auto& world = dist::world();
  SharedDir dir;
  const std::string path = dir.file("sparse.json");
  profile::Timeline t;
  if (world.rank() == world.size() - 1) record(t, world.rank());
  t.write(world, path);
  profile::Timeline none;  // every rank empty
  none.write(world, dir.file("empty.json"));
  if (world.rank() != 0) return;
  const std::string text = st::read_bytes(path);
  const auto by_pid = st::check_chrome_trace(text);
  EXPECT_EQ(by_pid.size(), 1u);
  EXPECT_EQ(by_pid.count(world.size() - 1), 1u);
  EXPECT_EQ(static_cast<int>(metadata_by_pid(nlohmann::json::parse(text), "process_name").size()), world.size());
  const std::string empty = st::read_bytes(dir.file("empty.json"));
  EXPECT_TRUE(st::check_chrome_trace(empty).empty());
  EXPECT_EQ(static_cast<int>(metadata_by_pid(nlohmann::json::parse(empty), "process_name").size()), world.size());
}

// In a group that does not start at world rank 0, pids and process names are global ranks:
// each rank alone in its group writes its own file as that group's rank 0.
TEST(TimelineDist, ProcessesAreNamedByGlobalRank) {
  auto& world = dist::world();
  const std::vector<int> mine{world.rank()};
  std::unique_ptr<dist::ProcessGroup> alone = world.split(mine, "");
  ASSERT_EQ(alone->rank(), 0);
  st::TempDir dir;
  profile::Timeline t;
  record(t, world.rank());
  t.write(*alone, dir.file("alone.json"));
  const std::string text = st::read_bytes(dir.file("alone.json"));
  const auto by_pid = st::check_chrome_trace(text);
  ASSERT_EQ(by_pid.size(), 1u);
  EXPECT_EQ(by_pid.begin()->first, world.rank());
  EXPECT_EQ(static_cast<int>(by_pid.begin()->second.size()), forwards_on(world.rank()) + 3);
  const auto names = metadata_by_pid(nlohmann::json::parse(text), "process_name");
  EXPECT_EQ(names.at(std::to_string(world.rank())),
            nlohmann::json({{"name", "rank " + std::to_string(world.rank())}}).dump());
  EXPECT_EQ(text, t.to_json(world.rank()));  // one rank's file is its to_json
}

// A path that cannot be written: rank 0 throws naming it, the others return normally, and
// the group is still in step (the next write succeeds on every rank).
TEST(TimelineDist, AnUnwritablePathFailsOnRankZeroNamingIt) {
  auto& world = dist::world();
  SharedDir dir;
  const std::string bad = dir.file("no-such-dir/trace.json");
  profile::Timeline t;
  record(t, world.rank());
  const std::string err = test::error_of([&] { t.write(world, bad); });
  if (world.rank() == 0) {
    test::expect_contains(err, bad);
    test::expect_contains(err, "Timeline::write");
  } else {
    EXPECT_EQ(err, "");
  }
  const std::string good = dir.file("after.json");
  EXPECT_EQ(test::error_of([&] { t.write(world, good); }), "");
  if (world.rank() == 0) {
    EXPECT_EQ(static_cast<int>(st::check_chrome_trace(st::read_bytes(good)).size()), world.size());
  }
}
