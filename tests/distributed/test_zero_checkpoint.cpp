// ZeroOptimizer::save / load: a resumed run continues bit for bit; checkpoints written for
// another stage, world size or model are refused with what was found and what was expected.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "zero_test_util.h"

namespace strata::test {
using namespace strata::checkpoint;
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
      EXPECT_TRUE(fs::exists(fs::path(dir.path()) / "index.json"));
      EXPECT_TRUE(fs::exists(fs::path(dir.path()) / ("shard_" + std::to_string(world.size() - 1) + ".safetensors")));
      EXPECT_FALSE(fs::exists(dir.path() + ".tmp"));
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
  // Another world size: the same index with world_size changed.
  world.barrier()->wait();
  if (world.rank() == 0) {
    const std::string path = dir.path() + "/index.json";
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    std::string s = text.str();
    const std::string from = "\"world_size\": " + std::to_string(world.size());
    const auto at = s.find(from);
    ASSERT_NE(at, std::string::npos) << s.substr(0, 200);
    s.replace(at, from.size(), "\"world_size\": " + std::to_string(world.size() + 1));
    std::ofstream(path) << s;
  }
  world.barrier()->wait();
  nn::GPT model(tiny_gpt(DType::Float32));
  ZeroOptimizer zero(model, adamw(), world, zero_options(2));
  const std::string msg = error_of([&] { zero.load(dir.path()); });
  EXPECT_NE(msg.find("on " + std::to_string(world.size() + 1) + " rank(s)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("resharding"), std::string::npos) << msg;
}

}  // namespace
}  // namespace strata::test
