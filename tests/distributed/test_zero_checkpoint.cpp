// ZeroOptimizer::save / load: a resumed run continues bit for bit; checkpoints written for
// another stage, world size or model are refused with what was found and what was expected.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "checkpoint/checksum.h"
#include "zero_test_util.h"

namespace strata::test {
using namespace strata::checkpoint;
using strata::checkpoint::detail::crc32;
namespace {

namespace fs = std::filesystem;

// A directory name every rank agrees on (rank 0's pid), removed at the end.
class SharedDir {
 public:
  explicit SharedDir(const std::string& tag) {
    auto& world = dist::world();
    Tensor pid = full({1}, static_cast<double>(::getpid()), {.dtype = DType::Int64});
    world.broadcast(pid, 0)->wait();
    path_ = (fs::temp_directory_path() / ("strata_zero_" + tag + "_" + std::to_string(static_cast<int64_t>(pid.item()))))
                .string();
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

// The step directory that <dir>/latest names.
fs::path latest_dir(const std::string& dir) {
  std::string name = read_text(fs::path(dir) / "latest");
  while (!name.empty() && name.back() == '\n') name.pop_back();
  return fs::path(dir) / name;
}

// Rank 0 edits the latest index.json; with `fix_checksum` its index_crc32 is recomputed (as a
// deliberate writer would), so that the checks behind the checksum are reached.
void edit_index(const std::string& dir, const std::function<void(nlohmann::json&)>& edit, bool fix_checksum) {
  auto& world = dist::world();
  world.barrier()->wait();
  if (world.rank() == 0) {
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
  }
  world.barrier()->wait();
}

// Sets (or clears) STRATA_TEST_CRASH_AT on every rank.
void crash_at(const char* point) {
  if (point) {
    ::setenv("STRATA_TEST_CRASH_AT", point, 1);
  } else {
    ::unsetenv("STRATA_TEST_CRASH_AT");
  }
}

void train_steps(nn::GPT& model, ZeroOptimizer& zero, int from, int to) {
  auto& world = dist::world();
  for (int s = from; s < to; ++s) {
    Batch mine = rank_slice(global_batch(s, world.size() * kZeroPerRank, model.config()), world.rank(), kZeroPerRank);
    model.loss(mine.inputs, mine.targets).backward();
    zero.clip_grad_norm(0.05);
    zero.step();
    zero.zero_grad();
  }
}

TEST(ZeroCheckpoint, ResumeContinuesBitForBit) {
  auto& world = dist::world();
  for (int stage : {0, 1, 2, 3}) {
    SharedDir dir("resume" + std::to_string(stage));
    nn::GPT model(tiny_gpt(DType::Float32));
    ZeroOptimizer zero(model, adamw(), world, zero_options(stage));
    train_steps(model, zero, 0, 3);
    zero.save(dir.path(), {{"step", "3"}});
    train_steps(model, zero, 3, 5);
    StateDict straight = zero.full_parameters();

    nn::GPTConfig other = tiny_gpt(DType::Float32);
    other.seed = 99;  // different initial weights: everything must come from the checkpoint
    nn::GPT resumed_model(other);
    ZeroOptimizer resumed(resumed_model, adamw(), world, zero_options(stage));
    Metadata meta = resumed.load(dir.path());
    EXPECT_EQ(meta.at("step"), "3");
    EXPECT_EQ(resumed.optimizer().step_count(), 3);
    train_steps(resumed_model, resumed, 3, 5);
    bool bitwise = false;
    max_relative_difference(resumed.full_parameters(), straight, &bitwise);
    EXPECT_TRUE(bitwise) << "stage " << stage;
    if (world.rank() == 0) {
      const fs::path step_dir = latest_dir(dir.path());
      EXPECT_EQ(step_dir.filename().string().rfind("step-3-", 0), 0u) << step_dir;
      EXPECT_TRUE(fs::exists(step_dir / "index.json"));
      EXPECT_TRUE(fs::exists(step_dir / ("shard_" + std::to_string(world.size() - 1) + ".safetensors")));
    }
  }
}

TEST(ZeroCheckpoint, RefusesAnotherStageWorldSizeOrModel) {
  auto& world = dist::world();
  SharedDir dir("refuse");
  {
    nn::GPT model(tiny_gpt(DType::Float32));
    ZeroOptimizer zero(model, adamw(), world, zero_options(2));
    zero.step();
    zero.save(dir.path());
  }
  {
    nn::GPT model(tiny_gpt(DType::Float32));
    ZeroOptimizer zero(model, adamw(), world, zero_options(3));
    const std::string msg = error_of([&] { zero.load(dir.path()); });
    EXPECT_NE(msg.find("written at ZeRO stage 2"), std::string::npos) << msg;
    EXPECT_NE(msg.find("this run is stage 3"), std::string::npos) << msg;
  }
  {
    nn::GPTConfig wider = tiny_gpt(DType::Float32);
    wider.n_embd = 64;
    nn::GPT model(wider);
    ZeroOptimizer zero(model, adamw(), world, zero_options(2));
    const std::string msg = error_of([&] { zero.load(dir.path()); });
    EXPECT_NE(msg.find("layout differs"), std::string::npos) << msg;
    EXPECT_NE(msg.find("expected"), std::string::npos) << msg;
  }
  // Another world size: the same index with world_size changed (and its checksum updated).
  edit_index(dir.path(), [&](nlohmann::json& index) { index["world_size"] = world.size() + 1; }, true);
  nn::GPT model(tiny_gpt(DType::Float32));
  ZeroOptimizer zero(model, adamw(), world, zero_options(2));
  const std::string msg = error_of([&] { zero.load(dir.path()); });
  EXPECT_NE(msg.find("on " + std::to_string(world.size() + 1) + " rank(s)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("resharding"), std::string::npos) << msg;
}

// Two saves of one run: at step 1 into `a`, at step 2 into `b`.
void save_two(const std::string& a, const std::string& b) {
  nn::GPT model(tiny_gpt(DType::Float32));
  ZeroOptimizer zero(model, adamw(), dist::world(), zero_options(2));
  train_steps(model, zero, 0, 1);
  zero.save(a, {{"step", "1"}});
  train_steps(model, zero, 1, 2);
  zero.save(b, {{"step", "2"}});
}

Metadata load_fresh(const std::string& dir) {
  nn::GPT model(tiny_gpt(DType::Float32));
  ZeroOptimizer zero(model, adamw(), dist::world(), zero_options(2));
  return zero.load(dir);
}

TEST(ZeroCheckpoint, RefusesAShardFromAnotherSave) {
  auto& world = dist::world();
  SharedDir a("mix_a"), b("mix_b");
  save_two(a.path(), b.path());
  const int victim = world.size() - 1;
  const std::string shard = "shard_" + std::to_string(victim) + ".safetensors";
  std::string id_a, id_b;
  world.barrier()->wait();
  if (world.rank() == 0) {
    id_a = nlohmann::json::parse(read_text(latest_dir(a.path()) / "index.json"))["save_id"];
    id_b = nlohmann::json::parse(read_text(latest_dir(b.path()) / "index.json"))["save_id"];
    fs::copy_file(latest_dir(a.path()) / shard, latest_dir(b.path()) / shard, fs::copy_options::overwrite_existing);
  }
  world.barrier()->wait();
  const std::string msg = error_of([&] { load_fresh(b.path()); });
  if (world.rank() == victim) {
    EXPECT_NE(msg.find(shard), std::string::npos) << msg;
    EXPECT_NE(msg.find("comes from another save"), std::string::npos) << msg;
    EXPECT_NE(msg.find("the shard is step 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("index.json is step 2"), std::string::npos) << msg;
    if (world.rank() == 0) {
      EXPECT_NE(msg.find(id_a), std::string::npos) << msg;
      EXPECT_NE(msg.find(id_b), std::string::npos) << msg;
    }
  } else {
    EXPECT_NE(msg.find("rank " + std::to_string(victim) + " failed"), std::string::npos) << msg;
  }
  // The same shard file with its identity intact but the index's checksum for it changed.
  SharedDir c("mix_c"), d("mix_d");
  save_two(c.path(), d.path());
  edit_index(d.path(), [&](nlohmann::json& index) { index["shards"][victim]["header_crc32"] = "00000000"; }, true);
  const std::string msg2 = error_of([&] { load_fresh(d.path()); });
  if (world.rank() == victim) {
    EXPECT_NE(msg2.find("shard checksum mismatch"), std::string::npos) << msg2;
  }
  EXPECT_FALSE(msg2.empty());
}

TEST(ZeroCheckpoint, RefusesAnEditedIndex) {
  SharedDir a("edit_a"), b("edit_b");
  save_two(a.path(), b.path());
  edit_index(b.path(), [](nlohmann::json& index) { index["metadata"]["step"] = "3"; }, false);
  const std::string msg = error_of([&] { load_fresh(b.path()); });
  EXPECT_NE(msg.find("index checksum mismatch"), std::string::npos) << msg;
  EXPECT_NE(msg.find("index.json"), std::string::npos) << msg;
}

TEST(ZeroCheckpoint, ACrashBeforeThePointerMovesKeepsThePreviousSave) {
  auto& world = dist::world();
  SharedDir dir("crash");
  nn::GPT model(tiny_gpt(DType::Float32));
  ZeroOptimizer zero(model, adamw(), world, zero_options(2));
  train_steps(model, zero, 0, 1);
  zero.save(dir.path(), {{"step", "1"}});
  train_steps(model, zero, 1, 2);
  // Every shard and the index of step 2 are written, `latest` not yet moved.
  crash_at("zero_save.before_pointer:throw");
  const std::string msg = error_of([&] { zero.save(dir.path(), {{"step", "2"}}); });
  crash_at(nullptr);
  EXPECT_FALSE(msg.empty());
  EXPECT_EQ(load_fresh(dir.path()).at("step"), "1");
  // The pointer moved, the older save not yet removed: step 2 is the checkpoint.
  crash_at("zero_save.after_pointer:throw");
  error_of([&] { zero.save(dir.path(), {{"step", "2"}}); });
  crash_at(nullptr);
  EXPECT_EQ(load_fresh(dir.path()).at("step"), "2");
  // A later complete save removes the older step directories only after moving the pointer.
  zero.save(dir.path(), {{"step", "2"}});
  EXPECT_EQ(load_fresh(dir.path()).at("step"), "2");
  world.barrier()->wait();
  if (world.rank() == 0) {
    int step_dirs = 0;
    for (const auto& e : fs::directory_iterator(dir.path())) step_dirs += e.path().filename().string().rfind("step-", 0) == 0;
    EXPECT_EQ(step_dirs, 1);
  }
}

TEST(ZeroCheckpoint, RefusesThePreviousLayoutSayingWhatItIs) {
  auto& world = dist::world();
  SharedDir dir("legacy");
  world.barrier()->wait();
  if (world.rank() == 0) {
    fs::create_directories(dir.path());
    std::ofstream(dir.path() + "/index.json") << R"({"format": "strata-zero-v1"})";
  }
  world.barrier()->wait();
  const std::string msg = error_of([&] { load_fresh(dir.path()); });
  EXPECT_NE(msg.find("previous layout"), std::string::npos) << msg;
  EXPECT_NE(msg.find("strata-zero-v1"), std::string::npos) << msg;
}

}  // namespace
}  // namespace strata::test
