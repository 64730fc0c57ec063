// Hugging Face model directories in save_pretrained's sharded layout (model.safetensors.index.json
// and its shards), for both families; the files are written here with strata's own writer.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "file_test_util.h"
#include "strata/checkpoint/hf_gpt2.h"
#include "strata/checkpoint/hf_llama.h"
#include "strata/checkpoint/safetensors.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using namespace strata::checkpoint;
using nlohmann::json;
using strata::testing::error_of;
using strata::testing::TempDir;
using strata::testing::write_bytes;

namespace {

constexpr const char* kShard1 = "model-00001-of-00002.safetensors";
constexpr const char* kShard2 = "model-00002-of-00002.safetensors";

// Replaces dir/model.safetensors by two shards (the first half of the names, in order, in the
// first) and the index that maps each name to its shard, as save_pretrained writes them.
void shard(const std::string& dir) {
  const StateDict all = load_safetensors(dir + "/model.safetensors").tensors;
  StateDict parts[2];
  json weight_map = json::object();
  size_t i = 0;
  for (const auto& [name, t] : all) {
    const int part = i++ < all.size() / 2 ? 0 : 1;
    parts[part][name] = t;
    weight_map[name] = part == 0 ? kShard1 : kShard2;
  }
  save_safetensors(dir + "/" + kShard1, parts[0], {{"format", "pt"}});
  save_safetensors(dir + "/" + kShard2, parts[1], {{"format", "pt"}});
  const json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}};
  write_bytes(dir + "/model.safetensors.index.json", index.dump(2));
  std::filesystem::remove(dir + "/model.safetensors");
}

void expect_same(const StateDict& got, const StateDict& want) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, w] : want) {
    ASSERT_TRUE(got.contains(name)) << name;
    EXPECT_EQ(got.at(name).to_vector<float>(), w.to_vector<float>()) << name;
  }
}

const Gpt2Config kGpt2{.vocab_size = 11, .n_positions = 8, .n_embd = 8, .n_layer = 2, .n_head = 2, .dropout = 0.0};
const HfLlamaConfig kLlama{
    .vocab_size = 11, .context = 8, .n_layer = 2, .n_head = 4, .n_kv_head = 2, .n_embd = 16, .intermediate_size = 24};

// A directory exported from a freshly initialised model.
void export_gpt2(const std::string& dir) {
  nn::GPT model({.vocab_size = 11, .context = 8, .n_layer = 2, .n_head = 2, .n_embd = 8, .seed = 4});
  export_gpt2_safetensors(dir, model.state_dict(), kGpt2);
}
void export_llama(const std::string& dir) {
  nn::Llama model({.vocab_size = 11,
                   .context = 8,
                   .n_layer = 2,
                   .n_head = 4,
                   .n_kv_head = 2,
                   .n_embd = 16,
                   .intermediate_size = 24,
                   .seed = 4});
  export_llama_safetensors(dir, model.state_dict(), kLlama);
}

}  // namespace

TEST(HfSharded, BothFamiliesImportFromAnIndexAndTwoShards) {
  TempDir tmp;
  const std::string gpt2 = tmp.file("gpt2"), llama = tmp.file("llama");
  export_gpt2(gpt2);
  export_llama(llama);
  const StateDict gpt2_whole = import_gpt2_safetensors(gpt2), llama_whole = import_llama_safetensors(llama);
  shard(gpt2);
  shard(llama);
  Gpt2Config g;
  expect_same(import_gpt2_safetensors(gpt2, &g), gpt2_whole);
  EXPECT_EQ(g.n_layer, 2);
  HfLlamaConfig l;
  expect_same(import_llama_safetensors(llama, &l), llama_whole);
  EXPECT_EQ(l.n_kv_head, 2);
}

TEST(HfSharded, ErrorsNameTheIndexTheShardAndTheTensor) {
  TempDir tmp;
  const std::string dir = tmp.path().string();
  export_gpt2(dir);
  const std::string single = tmp.file("model.safetensors"), index_path = tmp.file("model.safetensors.index.json");
  std::filesystem::rename(single, tmp.file("elsewhere"));
  const std::string neither = error_of([&] { import_gpt2_safetensors(dir); });
  EXPECT_CONTAINS(neither, "'" + dir + "' has neither model.safetensors nor model.safetensors.index.json");
  std::filesystem::rename(tmp.file("elsewhere"), single);

  shard(dir);
  const json index = json::parse(strata::testing::read_bytes(index_path));
  auto error_with = [&](const json& edited) {
    write_bytes(index_path, edited.dump());
    return error_of([&] { import_gpt2_safetensors(dir); });
  };
  const std::string where = "sharded model index '" + index_path + "'";
  json e = index;
  e["weight_map"]["ln_f.bias"] = "model-00003-of-00002.safetensors";
  EXPECT_CONTAINS(error_with(e),
                  where + ": 'ln_f.bias' is in shard 'model-00003-of-00002.safetensors', which is missing");
  e = index;
  e["weight_map"]["wte.weight"] = e["weight_map"]["wte.weight"] == kShard1 ? kShard2 : kShard1;
  EXPECT_CONTAINS(error_with(e), "tensor 'wte.weight'");
  e = index;
  e["weight_map"].erase("ln_f.bias");
  EXPECT_CONTAINS(error_with(e), "holds tensor 'ln_f.bias', which the index's weight_map does not list");
  e = index;
  e["weight_map"]["ln_f.bias"] = "../model.safetensors";
  EXPECT_CONTAINS(error_with(e), where + ": weight_map[\"ln_f.bias\"] \"../model.safetensors\" is not a file name");
  e = index;
  e["weight_map"]["ln_f.bias"] = 3;
  EXPECT_CONTAINS(error_with(e), where + ": weight_map[\"ln_f.bias\"] must be a file name, found 3");
  e = index;
  e.erase("weight_map");
  EXPECT_CONTAINS(error_with(e), where + ": missing object \"weight_map\"");
  write_bytes(index_path, "{\"weight_map\": ");
  EXPECT_CONTAINS(error_of([&] { import_gpt2_safetensors(dir); }), where + " is not valid JSON");

  // With both, model.safetensors is read, as transformers does.
  write_bytes(index_path, "not even JSON");
  export_gpt2(dir);
  EXPECT_NO_THROW(import_gpt2_safetensors(dir));
}
