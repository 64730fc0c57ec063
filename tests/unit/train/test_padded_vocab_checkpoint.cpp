// A padded vocabulary in checkpoints and the Hugging Face layout: config.padded_vocab_size is
// recorded when it pads and read back (absent: unpadded, as older checkpoints), a bad value
// names the field, a padded training state resumes bit for bit, and the families' export
// writes vocab_size rows while their import pads to the size asked for.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "file_test_util.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using strata::testing::error_of;
using strata::testing::expect_contains;
namespace fs = std::filesystem;

namespace {

nn::GPTConfig gpt(int64_t padded) {
  return {.vocab_size = 13, .padded_vocab_size = padded, .context = 8, .n_layer = 2, .n_head = 2, .n_embd = 8};
}
nn::LlamaConfig llama(int64_t padded) {
  return {.vocab_size = 13,
          .padded_vocab_size = padded,
          .context = 8,
          .n_layer = 2,
          .n_head = 4,
          .n_kv_head = 2,
          .n_embd = 16,
          .intermediate_size = 20};
}

std::string temp_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("strata_padded_vocab_" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : t.contiguous().to_vector<double>()) m = std::max(m, std::fabs(v));
  return m;
}

// Export through the family, import unpadded and padded: vocab_size rows in the file, the
// real rows back bit for bit, zero padding rows.
void hf_round_trip(const std::string& family, const nn::CausalLM& model, const checkpoint::Metadata& config,
                   const std::string& dir) {
  const train::ModelFamily& f = train::model_family(family);
  const StateDict state = model.state_dict();
  f.export_hf(dir, state, config, "test");
  checkpoint::Metadata plain_config, padded_config;
  const StateDict plain = f.import_hf(dir, &plain_config, 0);
  const StateDict padded = f.import_hf(dir, &padded_config, 16);
  EXPECT_EQ(plain_config.count("config.padded_vocab_size"), 0u) << family;
  EXPECT_EQ(padded_config.at("config.padded_vocab_size"), "16") << family;
  int vocab_tables = 0;
  for (const auto& [name, t] : state) {
    const std::string what = family + " " + name;
    if (name != "wte.weight" && name != "embed_tokens.weight" && name != "lm_head.weight") {
      EXPECT_EQ(max_abs_diff(plain.at(name), t), 0.0) << what;
      continue;
    }
    ++vocab_tables;
    EXPECT_EQ(plain.at(name).shape(), Shape({13, t.size(1)})) << what << ": the file holds vocab_size rows";
    EXPECT_EQ(max_abs_diff(plain.at(name), t.narrow(0, 0, 13)), 0.0) << what;
    EXPECT_EQ(padded.at(name).shape(), Shape({16, t.size(1)})) << what;
    EXPECT_EQ(max_abs_diff(padded.at(name).narrow(0, 0, 13), t.narrow(0, 0, 13)), 0.0) << what;
    EXPECT_EQ(max_abs(padded.at(name).narrow(0, 13, 3)), 0.0) << what << ": imported padding rows are zero";
  }
  EXPECT_EQ(vocab_tables, family == "gpt2" ? 1 : 2);
  // The padded import builds the model its config describes.
  auto built = f.build(padded_config, nullptr, {}, "test");
  EXPECT_EQ(built->padded_vocab_size(), 16);
  built->load_state_dict(padded);
  expect_contains(error_of([&] { (void)f.import_hf(dir, nullptr, 12); }), "padded_vocab_size 12 is smaller than");
}

}  // namespace

TEST(PaddedVocabCheckpoint, ConfigRecordsItOnlyWhenItPadsAndReadsItBack) {
  const checkpoint::Metadata padded = train::config_metadata(gpt(16));
  EXPECT_EQ(padded.at("config.padded_vocab_size"), "16");
  EXPECT_EQ(train::gpt_config_from_metadata(padded, "here").padded_vocab_size, 16);
  EXPECT_EQ(train::llama_config_from_metadata(train::config_metadata(llama(20)), "here").padded_vocab_size, 20);
  // Unpadded (0, or the vocabulary itself): no entry, so older checkpoints match as before.
  EXPECT_EQ(train::config_metadata(gpt(0)).count("config.padded_vocab_size"), 0u);
  EXPECT_EQ(train::config_metadata(gpt(13)).count("config.padded_vocab_size"), 0u);
  // A checkpoint without the entry loads unpadded.
  checkpoint::Metadata old = padded;
  old.erase("config.padded_vocab_size");
  EXPECT_EQ(train::gpt_config_from_metadata(old, "old").padded_vocab_size, 0);
  EXPECT_EQ(train::model_family("gpt2").build(old, nullptr, {}, "old")->padded_vocab_size(), 13);
  // Bad values name the field and the checkpoint.
  checkpoint::Metadata small = padded;
  small["config.padded_vocab_size"] = "12";
  expect_contains(
      error_of([&] { (void)train::gpt_config_from_metadata(small, "checkpoint 'c'"); }),
      "checkpoint 'c': metadata field 'config.padded_vocab_size' is 12, smaller than 'config.vocab_size' 13");
  small["config.padded_vocab_size"] = "many";
  expect_contains(error_of([&] { (void)train::gpt_config_from_metadata(small, "checkpoint 'c'"); }),
                  "'config.padded_vocab_size' is not an integer");
}

TEST(PaddedVocabCheckpoint, APaddedTrainingStateResumesBitForBit) {
  const nn::GPTConfig config = gpt(16);
  nn::GPT model(config);
  optim::AdamW opt(model.parameters(), {.lr = 1e-2, .weight_decay = 0.1});
  data::BatchSampler sampler({.dataset_size = 64, .batch_size = 2, .seed = 3});
  Generator gen(4);
  const Tensor x = randint(0, 13, {2, 8}, {.dtype = DType::Int64}, &gen);
  const Tensor y = randint(0, 13, {2, 8}, {.dtype = DType::Int64}, &gen);
  model.loss(x, y).backward();
  opt.step();
  opt.zero_grad();
  const std::string path = temp_dir("resume") + "/state.ckpt";
  train::save_training_state(path, {model, opt, sampler, train::config_metadata(config)}, 1);

  nn::GPT resumed(gpt(16));
  optim::AdamW resumed_opt(resumed.parameters(), {.lr = 1e-2, .weight_decay = 0.1});
  data::BatchSampler resumed_sampler({.dataset_size = 64, .batch_size = 2, .seed = 3});
  EXPECT_EQ(train::load_training_state(path, {resumed, resumed_opt, resumed_sampler, train::config_metadata(config)}),
            1);
  for (nn::GPT* m : {&model, &resumed}) {
    m->loss(x, y).backward();
  }
  opt.step();
  resumed_opt.step();
  const auto a = model.named_parameters(), b = resumed.named_parameters();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(max_abs_diff(a[i].second, b[i].second), 0.0) << a[i].first;
  EXPECT_EQ(max_abs(resumed.wte->weight.narrow(0, 13, 3)), 0.0);
  // An unpadded run refuses the padded state (the shapes differ), naming the tensor.
  nn::GPT unpadded(gpt(0));
  optim::AdamW unpadded_opt(unpadded.parameters(), {.lr = 1e-2});
  EXPECT_THROW(train::load_training_state(path, {unpadded, unpadded_opt, resumed_sampler}), Error);
  fs::remove_all(fs::path(path).parent_path().parent_path());
}

TEST(PaddedVocabCheckpoint, HuggingFaceExportStripsAndImportPads) {
  for (const std::string family : {"gpt2", "llama"}) {
    std::unique_ptr<nn::CausalLM> model;
    checkpoint::Metadata config;
    if (family == "gpt2") {
      model = std::make_unique<nn::GPT>(gpt(24));
      config = train::config_metadata(gpt(24));
    } else {
      model = std::make_unique<nn::Llama>(llama(24));
      config = train::config_metadata(llama(24));
    }
    hf_round_trip(family, *model, config, temp_dir(family));
  }
  fs::remove_all(fs::temp_directory_path() / ("strata_padded_vocab_" + std::to_string(::getpid())));
}
