// A checkpoint directory's housekeeping: the lock that keeps two runs from saving into one
// directory, the pruning rule (never a save of a higher step than the one committed), stale
// `latest` temporaries, and where a resume-if-present run starts when `latest` is missing.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "file_test_util.h"
#include "strata/checkpoint/directory_lock.h"
#include "strata/checkpoint/save_directory.h"
#include "strata/checkpoint/sharded.h"
#include "strata/distributed/init.h"
#include "strata/tensor/factory.h"
#include "test_util.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;
using checkpoint::DirectoryLock;

// A one-process world without MPI, as strata-ckpt's own.
dist::ProcessGroup& solo() { return dist::init({.start_mpi = false}); }

// Saves a one-tensor checkpoint of `step` into `dir`; returns the step directory's name.
std::string save_at(const std::string& dir, int64_t step, int keep_last = 2) {
  const Shape shape{4};
  const std::vector<checkpoint::SavePiece> pieces{
      {"model.w", shape, checkpoint::Region::whole(shape), full(shape, static_cast<double>(step))}};
  const checkpoint::SaveResult r = checkpoint::save_sharded(
      dir, solo(), checkpoint::take_snapshot(step, pieces, {{"step", std::to_string(step)}}), {.keep_last = keep_last});
  return fs::path(r.directory).filename().string();
}

std::string latest_of(const std::string& dir) {
  std::string name = read_bytes((fs::path(dir) / "latest").string());
  while (!name.empty() && name.back() == '\n') name.pop_back();
  return name;
}

// Flips the last byte of a save's shard (tensor data): verify then reports a checksum mismatch.
void damage(const std::string& dir, const std::string& save) {
  const std::string shard = (fs::path(dir) / save / "shard_0.safetensors").string();
  std::string bytes = read_bytes(shard);
  bytes.back() = static_cast<char>(bytes.back() ^ 0x40);
  write_bytes(shard, bytes);
}

TEST(DirectoryLock, ASecondLockIsRefusedNamingTheDirectoryAndTheHolder) {
  TempDir tmp;
  const std::string dir = tmp.file("ckpt");  // created by the lock
  DirectoryLock first(dir);
  EXPECT_TRUE(first.held());
  EXPECT_EQ(first.path(), (fs::path(dir) / DirectoryLock::kFileName).string());
  EXPECT_CONTAINS(read_bytes(first.path()), "PID " + std::to_string(::getpid()));
  // flock(2) conflicts between two open files even within one process.
  expect_error_mentions([&] { DirectoryLock second(dir); }, {"checkpoint directory '" + dir + "' is in use",
                                                             "PID " + std::to_string(::getpid()), first.path()});
  DirectoryLock moved = std::move(first);
  EXPECT_FALSE(first.held());  // NOLINT(bugprone-use-after-move): moved-from holds nothing
  expect_error_mentions([&] { DirectoryLock second(dir); }, {"is in use"});
  moved = DirectoryLock();  // releases
  DirectoryLock again(dir);
  EXPECT_TRUE(again.held());
}

TEST(DirectoryLock, CollectiveHoldsOnRankZeroAndRefusesAFile) {
  TempDir tmp;
  const DirectoryLock lock = DirectoryLock::collective(tmp.file("ckpt"), solo());
  EXPECT_TRUE(lock.held());
  expect_error_mentions([&] { DirectoryLock::collective(tmp.file("ckpt"), solo()); }, {"is in use"});
  write_bytes(tmp.file("file"), "x");
  expect_error_mentions([&] { DirectoryLock l(tmp.file("file")); }, {tmp.file("file")});
}

TEST(SaveDirectory, ListsSavesNewestStepFirst) {
  TempDir tmp;
  const std::string dir = tmp.file("ckpt");
  const std::string s5 = save_at(dir, 5, 10), s20 = save_at(dir, 20, 10), s10 = save_at(dir, 10, 10);
  fs::create_directories(fs::path(dir) / "step-30-unfinished");  // no index.json
  fs::create_directories(fs::path(dir) / "rejected-step-40-x");
  const std::vector<checkpoint::SaveEntry> saves = checkpoint::list_saves(dir);
  ASSERT_EQ(saves.size(), 4u);
  EXPECT_EQ(saves[0].name, "step-30-unfinished");
  EXPECT_FALSE(saves[0].complete);
  EXPECT_EQ(saves[1].name, s20);
  EXPECT_EQ(saves[2].name, s10);
  EXPECT_EQ(saves[3].name, s5);
  EXPECT_TRUE(saves[3].complete);
  EXPECT_EQ(saves[3].step, 5);
  EXPECT_EQ(checkpoint::save_step("step-123-abc"), 123);
  EXPECT_EQ(checkpoint::save_step("rejected-step-1-a"), -1);
  EXPECT_TRUE(checkpoint::list_saves(tmp.file("nowhere")).empty());
}

// A run that resumed from an older save must not delete newer progress: pruning keeps every
// save of a higher step (outside keep_last), and newer_saves names them.
TEST(SaveDirectory, PruningNeverRemovesASaveOfAHigherStep) {
  TempDir tmp;
  const std::string dir = tmp.file("ckpt");
  const std::string s10 = save_at(dir, 10), s25 = save_at(dir, 25);
  const std::string s11 = save_at(dir, 11, /*keep_last=*/1);
  EXPECT_EQ(latest_of(dir), s11);
  EXPECT_TRUE(fs::exists(fs::path(dir) / s25)) << "the newer save was pruned";
  EXPECT_FALSE(fs::exists(fs::path(dir) / s10)) << "keep_last 1 keeps no older save";
  EXPECT_EQ(checkpoint::newer_saves(dir, 11), std::vector<std::string>{s25});
  // Once the run passes it, the save of step 25 is pruned as any other.
  const std::string s30 = save_at(dir, 30, 1);
  EXPECT_FALSE(fs::exists(fs::path(dir) / s25));
  EXPECT_FALSE(fs::exists(fs::path(dir) / s11));
  EXPECT_TRUE(checkpoint::newer_saves(dir, 30).empty());
  EXPECT_EQ(latest_of(dir), s30);
}

// A kill while `latest` was being written leaves ".latest.tmp.<pid>.<n>.<hex>": the next save
// removes it (and leftovers of failed saves), and nothing else of the directory's.
TEST(SaveDirectory, TheNextSaveRemovesStaleLatestTemporaries) {
  TempDir tmp;
  const std::string dir = tmp.file("ckpt");
  save_at(dir, 1);
  write_bytes((fs::path(dir) / ".latest.tmp.4242.0.deadbeef").string(), "step-0-x\n");
  fs::create_directories(fs::path(dir) / ".tmp-step-2-0123456789abcdef");
  write_bytes((fs::path(dir) / "notes.txt").string(), "mine");
  const std::string s2 = save_at(dir, 2);
  EXPECT_FALSE(fs::exists(fs::path(dir) / ".latest.tmp.4242.0.deadbeef"));
  EXPECT_FALSE(fs::exists(fs::path(dir) / ".tmp-step-2-0123456789abcdef"));
  EXPECT_TRUE(fs::exists(fs::path(dir) / "notes.txt"));
  EXPECT_EQ(latest_of(dir), s2);
}

TEST(SaveDirectory, ResumeLatestFollowsLatestOrTheNewestSaveThatVerifies) {
  TempDir tmp;
  const std::string dir = tmp.file("ckpt");
  std::string note;
  EXPECT_EQ(checkpoint::resume_latest_path(dir, solo(), &note), "");  // nothing yet: a fresh start
  const std::string s5 = save_at(dir, 5), s10 = save_at(dir, 10);
  EXPECT_EQ(checkpoint::resume_latest_path(dir, solo(), &note), dir);
  EXPECT_EQ(note, "");

  // `latest` lost: the newest complete save, not step 0 (which would prune the saves).
  fs::remove(fs::path(dir) / "latest");
  fs::create_directories(fs::path(dir) / "step-99-unfinished");
  EXPECT_EQ(checkpoint::resume_latest_path(dir, solo(), &note), (fs::path(dir) / s10).string());
  EXPECT_CONTAINS(note, "no 'latest' file");
  EXPECT_CONTAINS(note, s10);

  damage(dir, s10);
  EXPECT_EQ(checkpoint::resume_latest_path(dir, solo(), &note), (fs::path(dir) / s5).string());
  EXPECT_CONTAINS(note, "passed over (kept): " + s10);
  EXPECT_CONTAINS(note, "checksum mismatch");

  damage(dir, s5);
  expect_error_mentions([&] { checkpoint::resume_latest_path(dir, solo()); },
                        {"none of its saves verifies", s10, s5, "refusing to start from step 0"});
  EXPECT_TRUE(fs::exists(fs::path(dir) / s10));
  EXPECT_TRUE(fs::exists(fs::path(dir) / s5));
}

}  // namespace
}  // namespace strata::testing
