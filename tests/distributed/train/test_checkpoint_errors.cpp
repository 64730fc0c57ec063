// The training checkpoint in one layout (ZeRO 0-3 on 1-4 ranks): a resumed run continues
// bit for bit; crashes at every point of the save keep a loadable checkpoint; and bad input
// (a shard of another save, an edited or newer index, a missing, truncated or extended shard,
// a FIFO in place of a file, optimizer state missing from the index, a tensor or shape the
// model does not have, an incomplete index, the previous release's directories) is refused
// naming the file and the tensor.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "checkpoint/checksum.h"
#include "distributed/zero_test_util.h"
#include "strata/distributed/object_collectives.h"
#include "strata/train/async_checkpointer.h"
#include "strata/train/distributed_checkpoint.h"

namespace strata::test {
using namespace strata::checkpoint;
using strata::checkpoint::detail::crc32;
namespace {

namespace fs = std::filesystem;

// A directory name every rank agrees on, removed at the end.
class SharedDir {
 public:
  explicit SharedDir(const std::string& tag) {
    auto& world = dist::world();
    const std::string mine =
        (fs::temp_directory_path() / ("strata_ckpt_" + tag + "_" + std::to_string(::getpid()))).string();
    path_ = dist::broadcast_string(world, mine);
  }
  ~SharedDir() {
    dist::world().barrier()->wait();
    if (dist::world().rank() == 0) fs::remove_all(path_);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

fs::path latest_dir(const std::string& dir) {
  std::string name = read_text(fs::path(dir) / "latest");
  while (!name.empty() && name.back() == '\n') name.pop_back();
  return fs::path(dir) / name;
}

// Rank 0 changes the newest save's files between barriers.
void on_rank0(const std::function<void()>& f) {
  auto& world = dist::world();
  world.barrier()->wait();
  if (world.rank() == 0) f();
  world.barrier()->wait();
}

// Rank 0 edits the latest index.json; with `fix_checksum` its index_crc32 is recomputed (as a
// deliberate writer would), so that the checks behind the checksum are reached.
void edit_index(const std::string& dir, const std::function<void(nlohmann::json&)>& edit, bool fix_checksum) {
  on_rank0([&] {
    const fs::path path = latest_dir(dir) / "index.json";
    nlohmann::json index = nlohmann::json::parse(read_text(path));
    edit(index);
    if (fix_checksum) {
      index.erase("index_crc32");
      const std::string text = index.dump();
      char buf[9];
      std::snprintf(buf, sizeof buf, "%08x", crc32(text.data(), text.size()));
      index["index_crc32"] = buf;
    }
    std::ofstream(path) << index.dump(1);
  });
}

void crash_at(const char* point) {
  if (point) {
    ::setenv("STRATA_TEST_CRASH_AT", point, 1);
  } else {
    ::unsetenv("STRATA_TEST_CRASH_AT");
  }
}

// A tiny GPT trained with ZeRO over the world, with its checkpoint target.
struct CheckpointedRun {
  explicit CheckpointedRun(int stage, nn::GPTConfig config = tiny_gpt(DType::Float32))
      : model(config), zero(model, adamw(), dist::world(), zero_options(stage)) {}
  train::CheckpointTarget target() {
    return {.model = model, .world = dist::world(), .zero = &zero, .data = &dist::world()};
  }
  void train(int from, int to) {
    auto& world = dist::world();
    for (int s = from; s < to; ++s) {
      Batch mine = rank_slice(global_batch(s, world.size() * kZeroPerRank, model.config()), world.rank(), kZeroPerRank);
      model.loss(mine.inputs, mine.targets).backward();
      zero.clip_grad_norm(0.05);
      zero.step();
      zero.zero_grad();
    }
  }
  void save(const std::string& dir, int64_t step, int keep_last = 2) {
    train::save_training_checkpoint(dir, target(), step, {}, {.keep_last = keep_last});
  }
  int64_t load(const std::string& dir) { return train::load_training_checkpoint(dir, target()); }
  nn::GPT model;
  ZeroOptimizer zero;
};

int64_t load_fresh(const std::string& dir, int stage = 2) { return CheckpointedRun(stage).load(dir); }

// Two saves of one run: at step 1 into `a`, at step 2 into `b`.
void save_two(const std::string& a, const std::string& b) {
  CheckpointedRun run(2);
  run.train(0, 1);
  run.save(a, 1);
  run.train(1, 2);
  run.save(b, 2);
}

int count_entries(const std::string& dir, const std::string& prefix) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().filename().string().rfind(prefix, 0) == 0;
  return n;
}

// Watches a FIFO put in place of a checkpoint file. Should a reader block in open() on it
// (the bug this guards against), the watchdog opens the FIFO's other end after 20 s so that
// the test fails instead of hanging; blocked() then says so.
class FifoWatchdog {
 public:
  explicit FifoWatchdog(fs::path path) : path_(std::move(path)) {
    thread_ = std::thread([this] {
      std::unique_lock<std::mutex> lock(mutex_);
      if (cv_.wait_for(lock, std::chrono::seconds(20), [this] { return done_; })) return;
      blocked_ = true;
      while (!done_) {  // release every reader stuck in open()
        const int fd = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK);
        if (fd >= 0) ::close(fd);
        cv_.wait_for(lock, std::chrono::milliseconds(50));
      }
    });
  }
  ~FifoWatchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  bool blocked() {
    std::lock_guard<std::mutex> lock(mutex_);
    return blocked_;
  }

 private:
  fs::path path_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false, blocked_ = false;
  std::thread thread_;
};

}  // namespace

TEST(TrainingCheckpoint, ResumeContinuesBitForBit) {
  auto& world = dist::world();
  for (int stage : {0, 1, 2, 3}) {
    SharedDir dir("resume" + std::to_string(stage));
    CheckpointedRun run(stage);
    run.train(0, 3);
    run.save(dir.path(), 3);
    run.train(3, 5);
    StateDict straight = run.zero.full_parameters();

    nn::GPTConfig other = tiny_gpt(DType::Float32);
    other.seed = 99;  // different initial weights: everything must come from the checkpoint
    CheckpointedRun resumed(stage, other);
    EXPECT_EQ(resumed.load(dir.path()), 3);
    EXPECT_EQ(resumed.zero.optimizer().step_count(), 3);
    resumed.train(3, 5);
    bool bitwise = false;
    max_relative_difference(resumed.zero.full_parameters(), straight, &bitwise);
    EXPECT_TRUE(bitwise) << "stage " << stage;
    if (world.rank() == 0) {
      const fs::path step_dir = latest_dir(dir.path());
      EXPECT_EQ(step_dir.filename().string().rfind("step-3-", 0), 0u) << step_dir;
      EXPECT_TRUE(fs::exists(step_dir / "index.json"));
      EXPECT_TRUE(fs::exists(step_dir / ("shard_" + std::to_string(world.size() - 1) + ".safetensors")));
      EXPECT_TRUE(ShardedCheckpoint::open(dir.path()).verify().empty());
    }
  }
}

// fp16 loss scaling resumes where it was: the scale after a back-off and the count of good
// steps towards the next growth (a fresh scaler would start at 65536 with none).
TEST(TrainingCheckpoint, TheLossScaleAndItsGrowthCounterResume) {
  SharedDir dir("loss_scale");
  CheckpointedRun run(1);
  run.train(0, 1);
  optim::GradScaler scaler({.init_scale = 1024.0, .growth_interval = 10});
  // As after one back-off and 3 good steps.
  scaler.load_state_dict({{"scale", from_vector(std::vector<double>{512.0}, {})},
                          {"growth_tracker", from_vector(std::vector<int64_t>{3}, {})}});
  train::CheckpointTarget target = run.target();
  target.loss_scaler = &scaler;
  train::save_training_checkpoint(dir.path(), target, 4);

  CheckpointedRun resumed(1);
  optim::GradScaler fresh({.init_scale = 1024.0, .growth_interval = 10});
  train::CheckpointTarget into = resumed.target();
  into.loss_scaler = &fresh;
  EXPECT_EQ(train::load_training_checkpoint(dir.path(), into), 4);
  EXPECT_EQ(fresh.scale_value(), 512.0);
  EXPECT_EQ(fresh.state_dict().at("growth_tracker").to_vector<int64_t>(), std::vector<int64_t>{3});
}

// The background save holds the state of its step although training changes the weights
// meanwhile; the committed checkpoint loads as a synchronous save of the same step does.
TEST(TrainingCheckpoint, AsyncSaveHoldsTheStateOfItsStep) {
  SharedDir sync_dir("sync"), async_dir("async");
  CheckpointedRun run(2);
  run.train(0, 2);
  run.save(sync_dir.path(), 2);
  train::AsyncCheckpointer async(async_dir.path(), dist::world());
  async.save(run.target(), 2);
  EXPECT_TRUE(async.pending());
  int steps_while_pending = 0;
  for (int s = 2; s < 12 && async.pending(); ++s) {
    run.train(s, s + 1);
    async.poll();
    ++steps_while_pending;
  }
  async.finish();
  EXPECT_FALSE(async.pending());
  EXPECT_GE(steps_while_pending, 1);
  CheckpointedRun from_sync(2), from_async(2);
  EXPECT_EQ(from_sync.load(sync_dir.path()), 2);
  EXPECT_EQ(from_async.load(async_dir.path()), 2);
  bool bitwise = false;
  max_relative_difference(from_async.zero.full_parameters(), from_sync.zero.full_parameters(), &bitwise);
  EXPECT_TRUE(bitwise);
  // And both continue identically (the optimizer state came along).
  from_sync.train(2, 3);
  from_async.train(2, 3);
  max_relative_difference(from_async.zero.full_parameters(), from_sync.zero.full_parameters(), &bitwise);
  EXPECT_TRUE(bitwise);
}

TEST(TrainingCheckpoint, KeepsTheNewestSaves) {
  SharedDir dir("keep");
  CheckpointedRun run(1);
  for (int step = 1; step <= 4; ++step) run.save(dir.path(), step, 2);
  on_rank0([&] {
    EXPECT_EQ(count_entries(dir.path(), "step-"), 2);
    EXPECT_EQ(latest_dir(dir.path()).filename().string().rfind("step-4-", 0), 0u);
  });
  run.save(dir.path(), 5, 1);
  on_rank0([&] { EXPECT_EQ(count_entries(dir.path(), "step-"), 1); });
}

TEST(TrainingCheckpoint, RefusesAModelOfAnotherShape) {
  SharedDir dir("shape");
  CheckpointedRun(2).save(dir.path(), 0);
  nn::GPTConfig wider = tiny_gpt(DType::Float32);
  wider.n_embd = 64;
  const std::string msg = error_of([&] { CheckpointedRun(2, wider).load(dir.path()); });
  EXPECT_NE(msg.find("tensor 'model."), std::string::npos) << msg;
  EXPECT_NE(msg.find("but the model expects"), std::string::npos) << msg;
  // A model with a parameter the checkpoint lacks.
  nn::GPTConfig deeper = tiny_gpt(DType::Float32);
  deeper.n_layer += 1;
  const std::string msg2 = error_of([&] { CheckpointedRun(2, deeper).load(dir.path()); });
  EXPECT_NE(msg2.find("has no tensor 'model.h." + std::to_string(deeper.n_layer - 1)), std::string::npos) << msg2;
}

TEST(TrainingCheckpoint, RefusesAShardFromAnotherSave) {
  auto& world = dist::world();
  SharedDir a("mix_a"), b("mix_b");
  save_two(a.path(), b.path());
  const int victim = world.size() - 1;
  const std::string shard = "shard_" + std::to_string(victim) + ".safetensors";
  on_rank0([&] {
    fs::copy_file(latest_dir(a.path()) / shard, latest_dir(b.path()) / shard, fs::copy_options::overwrite_existing);
  });
  const std::string msg = error_of([&] { load_fresh(b.path()); });
  if (world.rank() == victim) {
    EXPECT_NE(msg.find(shard + "': "), std::string::npos) << msg;
    EXPECT_NE(msg.find("header checksum mismatch"), std::string::npos) << msg;
  } else {
    EXPECT_NE(msg.find("rank " + std::to_string(victim) + " failed"), std::string::npos) << msg;
  }
}

TEST(TrainingCheckpoint, RefusesCorruptedTruncatedAndMissingShards) {
  SharedDir a("bad_a"), b("bad_b");
  save_two(a.path(), b.path());
  // One flipped byte near the end of shard 0's data: its piece's checksum fails.
  on_rank0([&] {
    const fs::path path = latest_dir(b.path()) / "shard_0.safetensors";
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-3, std::ios::end);
    char c = 0;
    f.read(&c, 1);
    f.seekp(-3, std::ios::end);
    c = static_cast<char>(c ^ 0x5a);
    f.write(&c, 1);
  });
  std::string msg = error_of([&] { load_fresh(b.path()); });
  if (dist::world().rank() == 0) {
    EXPECT_NE(msg.find("shard_0.safetensors"), std::string::npos) << msg;
    EXPECT_NE(msg.find("checksum mismatch"), std::string::npos) << msg;
    EXPECT_NE(msg.find("tensor '"), std::string::npos) << msg;
  }
  // Truncated: the last bytes are gone.
  on_rank0([&] {
    const fs::path path = latest_dir(a.path()) / "shard_0.safetensors";
    fs::resize_file(path, fs::file_size(path) - 16);
  });
  msg = error_of([&] { load_fresh(a.path()); });
  if (dist::world().rank() == 0) {
    EXPECT_NE(msg.find("shard_0.safetensors"), std::string::npos) << msg;
    EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  }
  // Missing.
  on_rank0([&] { fs::remove(latest_dir(a.path()) / "shard_0.safetensors"); });
  msg = error_of([&] { load_fresh(a.path()); });
  if (dist::world().rank() == 0) {
    EXPECT_NE(msg.find("shard_0.safetensors"), std::string::npos) << msg;
  }
  EXPECT_FALSE(msg.empty());
}

TEST(TrainingCheckpoint, RefusesAnEditedIncompleteOrNewerIndex) {
  SharedDir a("edit_a"), b("edit_b");
  save_two(a.path(), b.path());
  edit_index(
      b.path(), [](nlohmann::json& index) { index["metadata"]["step"] = "3"; }, false);
  std::string msg = error_of([&] { load_fresh(b.path()); });
  EXPECT_NE(msg.find("index checksum mismatch"), std::string::npos) << msg;
  EXPECT_NE(msg.find("index.json"), std::string::npos) << msg;
  // A tensor with one piece dropped (checksum recomputed): the gap is named.
  edit_index(
      a.path(), [](nlohmann::json& index) { index["tensors"]["model.wte.weight"]["pieces"].erase(0); }, true);
  msg = error_of([&] { load_fresh(a.path()); });
  EXPECT_NE(msg.find("model.wte.weight"), std::string::npos) << msg;
  // A newer format version.
  edit_index(
      a.path(),
      [](nlohmann::json& index) {
        index["format"] = "strata-sharded-v9";
        index["version"] = 9;
      },
      true);
  msg = error_of([&] { load_fresh(a.path()); });
  EXPECT_NE(msg.find("written by a newer strata"), std::string::npos) << msg;
}

// Every reader refuses a FIFO where a file belongs, naming it, instead of waiting in open()
// for a writer (which no collective timeout would end): a shard at resume and at verify, the
// index and `latest`.
TEST(TrainingCheckpoint, RefusesAFifoInPlaceOfAShardTheIndexOrLatest) {
  auto& world = dist::world();
  SharedDir a("fifo_a"), b("fifo_b");
  save_two(a.path(), b.path());
  const fs::path shard = latest_dir(b.path()) / "shard_0.safetensors";
  const fs::path index = latest_dir(a.path()) / "index.json";
  for (const fs::path& victim : {shard, index, fs::path(a.path()) / "latest"}) {
    on_rank0([&] {
      fs::remove(victim);
      ASSERT_EQ(::mkfifo(victim.c_str(), 0600), 0) << victim;
    });
    FifoWatchdog watchdog(victim);
    const std::string dir = victim == shard ? b.path() : a.path();
    const std::string msg = error_of([&] { load_fresh(dir); });
    EXPECT_FALSE(watchdog.blocked()) << victim << ": a reader waited in open()";
    if (world.rank() == 0) {
      EXPECT_NE(msg.find(victim.string() + "' is not a regular file (it is a FIFO)"), std::string::npos) << msg;
    }
    EXPECT_FALSE(msg.empty()) << victim;
    if (victim == shard && world.rank() == 0) {
      const std::vector<std::string> problems = ShardedCheckpoint::open(b.path()).verify();
      EXPECT_FALSE(watchdog.blocked()) << "verify waited in open()";
      ASSERT_FALSE(problems.empty());
      EXPECT_NE(problems.front().find("shard_0.safetensors' is not a regular file"), std::string::npos)
          << problems.front();
    }
    world.barrier()->wait();
  }
}

// Bytes appended to a shard are read by no piece, so only the file's size tells: verify and
// load compare it with the size index.json records, naming the file and both sizes.
TEST(TrainingCheckpoint, RefusesBytesAppendedToAShard) {
  auto& world = dist::world();
  SharedDir a("append_a"), b("append_b");
  save_two(a.path(), b.path());
  const int victim = world.size() - 1;
  const fs::path shard = latest_dir(b.path()) / ("shard_" + std::to_string(victim) + ".safetensors");
  uint64_t size = 0;
  on_rank0([&] {
    size = fs::file_size(shard);
    std::ofstream(shard, std::ios::app | std::ios::binary) << "appended";
  });
  const std::string msg = error_of([&] { load_fresh(b.path()); });
  if (world.rank() == victim) {
    EXPECT_NE(msg.find(shard.filename().string() + "': "), std::string::npos) << msg;
    EXPECT_NE(msg.find("the file has "), std::string::npos) << msg;
    EXPECT_NE(msg.find("bytes appended after the save"), std::string::npos) << msg;
  }
  EXPECT_FALSE(msg.empty());
  if (world.rank() == 0) {
    const std::vector<std::string> problems = ShardedCheckpoint::open(b.path()).verify();
    ASSERT_EQ(problems.size(), 1u);
    const std::string sizes = std::to_string(size + 8) + " bytes but index.json records " + std::to_string(size);
    EXPECT_NE(problems.front().find(sizes), std::string::npos) << problems.front();
  }
}

// An index whose checksum was recomputed after its optimizer tensors were dropped: a full
// resume refuses it, naming a missing tensor (it would restart the optimizer silently); a
// weights-only load takes the weights.
TEST(TrainingCheckpoint, RefusesAnIndexWithoutTheOptimizerStateTheSaveWrote) {
  SharedDir a("optim_a"), b("optim_b");
  save_two(a.path(), b.path());
  edit_index(
      b.path(),
      [](nlohmann::json& index) {
        for (auto it = index["tensors"].begin(); it != index["tensors"].end();)
          it = it.key().rfind("optim.", 0) == 0 ? index["tensors"].erase(it) : std::next(it);
      },
      true);
  const std::string msg = error_of([&] { load_fresh(b.path()); });
  EXPECT_NE(msg.find("the save recorded optimizer state (exp_avg, exp_avg_sq, step)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("the index has no 'optim."), std::string::npos) << msg;
  EXPECT_NE(msg.find("more optimizer tensors"), std::string::npos) << msg;
  CheckpointedRun run(2);
  EXPECT_EQ(train::load_training_checkpoint(b.path(), run.target(), nullptr, {.weights_only = true}), 2);
  // One tensor dropped from an intact save is named too.
  edit_index(
      a.path(), [](nlohmann::json& index) { index["tensors"].erase("optim.wte.weight.exp_avg_sq"); }, true);
  const std::string one = error_of([&] { load_fresh(a.path()); });
  // The rank that owns wte's state names the tensor; the others name that rank.
  const bool named = one.find("'optim.wte.weight.exp_avg_sq'") != std::string::npos;
  EXPECT_TRUE(named || one.find(" failed (see its error)") != std::string::npos) << one;
  Tensor naming = from_vector(std::vector<int64_t>{named ? 1 : 0}, {});
  dist::world().all_reduce(naming)->wait();
  EXPECT_GE(naming.item(), 1.0) << "no rank named the missing tensor";
}

TEST(TrainingCheckpoint, ACrashAtAnyPointOfTheSaveKeepsALoadableCheckpoint) {
  SharedDir dir("crash");
  CheckpointedRun run(2);
  run.train(0, 1);
  run.save(dir.path(), 1);
  run.train(1, 2);
  // Shards written, the step directory not yet renamed; then renamed, `latest` not yet moved.
  for (const char* point : {"sharded_save.before_rename:throw", "sharded_save.before_pointer:throw"}) {
    crash_at(point);
    EXPECT_FALSE(error_of([&] { run.save(dir.path(), 2); }).empty()) << point;
    crash_at(nullptr);
    EXPECT_EQ(load_fresh(dir.path()), 1) << point;
  }
  // `latest` moved, older saves not yet pruned: step 2 is the checkpoint.
  crash_at("sharded_save.after_pointer:throw");
  error_of([&] { run.save(dir.path(), 2); });
  crash_at(nullptr);
  EXPECT_EQ(load_fresh(dir.path()), 2);
  // A later complete save removes what the failed ones left.
  run.save(dir.path(), 3, 1);
  EXPECT_EQ(load_fresh(dir.path()), 3);
  on_rank0([&] {
    EXPECT_EQ(count_entries(dir.path(), "step-"), 1);
    EXPECT_EQ(count_entries(dir.path(), ".tmp-"), 0);
  });
}

TEST(TrainingCheckpoint, RefusesThePreviousZeroLayoutSayingWhatItIs) {
  SharedDir dir("legacy");
  on_rank0([&] {
    fs::create_directories(dir.path() + "/step-3-0000000000000000");
    std::ofstream(dir.path() + "/latest") << "step-3-0000000000000000\n";
    std::ofstream(dir.path() + "/step-3-0000000000000000/index.json") << R"({"format": "strata-zero-v2"})";
  });
  const std::string msg = error_of([&] { load_fresh(dir.path()); });
  EXPECT_NE(msg.find("strata-zero-v2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("previous release"), std::string::npos) << msg;
}

TEST(TrainingCheckpoint, RefusesReservedMetadataKeys) {
  SharedDir dir("reserved");
  CheckpointedRun run(1);
  const std::string msg = error_of([&] {
    train::save_training_checkpoint(dir.path(), run.target(), 0, {{"rng.seed", "1"}});
  });
  EXPECT_NE(msg.find("metadata key 'rng.seed' is reserved"), std::string::npos) << msg;
}

}  // namespace strata::test

namespace strata::test {
namespace {

// A save that was not told the data-parallel group: every rank writes the replicated weights
// in full. The error says so and names the field that was missed.
TEST(TrainingCheckpoint, AMissingDataGroupIsNamedAsTheLikelyCause) {
  SharedDir dir("nodata");
  CheckpointedRun run(0);  // stage 0 (DDP): every rank holds all the weights
  train::CheckpointTarget target = run.target();
  target.data = nullptr;
  const std::string msg = error_of([&] { train::save_training_checkpoint(dir.path(), target, 1); });
  // Rank 0 checks the pieces and explains; the other ranks name rank 0's failure.
  if (dist::world().rank() != 0) {
    EXPECT_NE(msg.find("rank 0 failed"), std::string::npos) << msg;
    run.save(dir.path(), 1);
    return;
  }
  EXPECT_NE(msg.find("written twice"), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::to_string(dist::world().size()) + " pieces each hold the whole tensor"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("train::CheckpointTarget::data"), std::string::npos) << msg;
  run.save(dir.path(), 1);  // with the group the same state saves
}

}  // namespace
}  // namespace strata::test
