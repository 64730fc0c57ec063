#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "strata/strata.h"

using namespace strata;
using namespace strata::data;
using namespace strata::checkpoint;
namespace fs = std::filesystem;

namespace {

// One training run's objects, built the way examples/train_gpt builds them.
struct TrainingRun {
  SyntheticTask task{{.digits = 2, .seed = 3}};
  nn::GPT model{nn::GPTConfig{
      .vocab_size = 14, .context = 9, .n_layer = 2, .n_head = 2, .n_embd = 16, .dropout = 0.1, .seed = 3}};
  optim::AdamW optimizer{optim::weight_decay_groups(model.named_parameters(), 1e-2, 0.1), {.lr = 1e-2}};
  optim::CosineSchedule schedule{optimizer, {.warmup_steps = 2, .total_steps = 8, .min_lr_ratio = 0.1}};
  BatchSampler sampler{{.dataset_size = 1 << 20, .batch_size = 4, .seed = 3}};

  void steps(int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      Batch b = task.make_batch(sampler.next());
      model.loss(b.inputs, b.targets).backward();  // dropout draws from the default generator
      optim::clip_grad_norm(model.parameters(), 1.0);
      optimizer.step();
      optimizer.zero_grad();
      schedule.step();
    }
  }
  train::TrainingStateRefs refs() { return {model, optimizer, sampler}; }
};

std::string temp_path(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("strata_resume_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

}  // namespace

TEST(TrainingState, ResumeContinuesBitForBit) {
  manual_seed(11);
  TrainingRun straight;
  straight.steps(8);

  manual_seed(11);
  const std::string path = temp_path("state.ckpt");
  {
    TrainingRun first;
    first.steps(5);
    train::save_training_state(path, first.refs(), 5, {{"note", "half way"}});
  }
  manual_seed(999);  // the resumed process starts with another RNG state
  TrainingRun resumed;
  Metadata extra;
  int64_t step = train::load_training_state(path, resumed.refs(), &extra);
  EXPECT_EQ(step, 5);
  EXPECT_EQ(extra.at("note"), "half way");
  resumed.schedule.set_last_step(step);
  resumed.steps(3);

  auto a = straight.model.named_parameters();
  auto b = resumed.model.named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(max_abs_diff(a[i].second, b[i].second), 0.0) << a[i].first;
  }
  EXPECT_EQ(default_generator().offset(), [] {
    manual_seed(11);
    TrainingRun r;
    r.steps(8);
    return default_generator().offset();
  }());
  fs::remove_all(fs::path(path).parent_path());
}

TEST(TrainingState, ErrorsNameTheFileAndEntry) {
  TrainingRun run;
  const std::string path = temp_path("mismatch.ckpt");
  train::save_training_state(path, run.refs(), 1);
  struct Other {
    nn::GPT model{nn::GPTConfig{.vocab_size = 14, .context = 9, .n_layer = 1, .n_head = 2, .n_embd = 16}};
    optim::AdamW optimizer{model.parameters()};
    BatchSampler sampler{{.dataset_size = 1 << 20, .batch_size = 4, .seed = 3}};
  } other;
  try {
    train::load_training_state(path, {other.model, other.optimizer, other.sampler});
    FAIL() << "a state saved for 2 layers must not load into 1";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("mismatch.ckpt"), std::string::npos) << msg;
    EXPECT_NE(msg.find("h.1"), std::string::npos) << msg;
  }
  // A truncated file is refused with the file named; the saved state is untouched by a
  // failed save.
  fs::resize_file(path, fs::file_size(path) - 10);
  EXPECT_THROW(train::load_training_state(path, run.refs()), Error);
  EXPECT_THROW(train::save_training_state(path, run.refs(), 1, {{"step", "7"}}), Error);
  fs::remove_all(fs::path(path).parent_path());
}

namespace {
// The file's bytes with `from` replaced by `to` (same length: the safetensors structure stays valid).
void edit_file(const std::string& path, const std::string& from, const std::string& to) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = bytes.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  bytes.replace(at, from.size(), to);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}
}  // namespace

TEST(TrainingState, AnEditedStepIsAHeaderChecksumMismatch) {
  TrainingRun run;
  const std::string path = temp_path("edited.ckpt");
  train::save_training_state(path, run.refs(), 20);
  edit_file(path, "\"step\":\"20\"", "\"step\":\"30\"");
  try {
    train::load_training_state(path, run.refs());
    FAIL() << "an edited step must be refused";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("edited.ckpt"), std::string::npos) << msg;
    EXPECT_NE(msg.find("header checksum mismatch"), std::string::npos) << msg;
  }
  fs::remove_all(fs::path(path).parent_path());
}

TEST(TrainingState, TheModelConfigurationIsStoredAndChecked) {
  const nn::GPTConfig two_heads{
      .vocab_size = 14, .context = 9, .n_layer = 2, .n_head = 2, .n_embd = 16, .dropout = 0.1, .seed = 3};
  nn::GPTConfig four_heads = two_heads;
  four_heads.n_head = 4;  // the same parameter shapes
  TrainingRun run;
  const std::string path = temp_path("config.ckpt");
  train::TrainingStateRefs refs = run.refs();
  refs.config = train::gpt_config_metadata(two_heads);
  train::save_training_state(path, refs, 3);
  EXPECT_EQ(train::load_training_state(path, refs), 3);

  TrainingRun other;
  train::TrainingStateRefs other_refs = other.refs();
  other_refs.config = train::gpt_config_metadata(four_heads);
  try {
    train::load_training_state(path, other_refs);
    FAIL() << "a state saved with 2 heads must not resume with 4";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("config.ckpt"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'config.n_head' is 2 in the checkpoint, 4 in this run"), std::string::npos) << msg;
  }
  // A state saved without a configuration is refused by a run that checks one.
  train::save_training_state(path, run.refs(), 3);
  try {
    train::load_training_state(path, refs);
    FAIL() << "a state without a configuration must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is missing"), std::string::npos) << e.what();
  }
  fs::remove_all(fs::path(path).parent_path());
}

TEST(TrainingState, MalformedNumbersAreNamedErrors) {
  const Metadata meta{{"ok", "20"},   {"dash", "-"}, {"long", "99999999999999999999"}, {"neg", "-5"}, {"space", " 7"},
                      {"tail", "7x"}, {"empty", ""}};
  EXPECT_EQ(train::metadata_int(meta, "ok", "w"), 20);
  for (const char* key : {"dash", "long", "neg", "space", "tail", "empty"}) {
    try {
      train::metadata_int(meta, key, "index 'x'");
      FAIL() << key;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("index 'x': metadata field '" + std::string(key) + "' is not an integer"), std::string::npos)
          << msg;
    }
  }
  EXPECT_THROW(train::metadata_u64(meta, "long", "w"), Error);
  EXPECT_THROW(train::metadata_u64(meta, "dash", "w"), Error);
  EXPECT_THROW(train::metadata_int(meta, "absent", "w"), Error);
}
