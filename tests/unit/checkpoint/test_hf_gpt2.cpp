// Hugging Face GPT-2 export/import (model.safetensors + config.json).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "file_test_util.h"
#include "strata/checkpoint/hf_gpt2.h"
#include "strata/checkpoint/safetensors.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using namespace strata::checkpoint;
using strata::testing::error_of;
using strata::testing::read_bytes;
using strata::testing::TempDir;
using strata::testing::write_bytes;

namespace {

const Gpt2Config kTiny{.vocab_size = 11, .n_positions = 8, .n_embd = 8, .n_layer = 2, .n_head = 2, .dropout = 0.0};

// name -> strata shape, written out by hand (not derived from the code under test).
std::vector<std::pair<std::string, Shape>> tiny_params() {
  std::vector<std::pair<std::string, Shape>> p = {{"wte.weight", {11, 8}}, {"wpe.weight", {8, 8}}};
  for (int i = 0; i < 2; ++i) {
    const std::string h = "h." + std::to_string(i) + ".";
    for (auto& [n, s] : std::vector<std::pair<std::string, Shape>>{{"ln_1.weight", {8}},
                                                                   {"ln_1.bias", {8}},
                                                                   {"attn.c_attn.weight", {24, 8}},
                                                                   {"attn.c_attn.bias", {24}},
                                                                   {"attn.c_proj.weight", {8, 8}},
                                                                   {"attn.c_proj.bias", {8}},
                                                                   {"ln_2.weight", {8}},
                                                                   {"ln_2.bias", {8}},
                                                                   {"mlp.c_fc.weight", {32, 8}},
                                                                   {"mlp.c_fc.bias", {32}},
                                                                   {"mlp.c_proj.weight", {8, 32}},
                                                                   {"mlp.c_proj.bias", {8}}})
      p.emplace_back(h + n, s);
  }
  p.emplace_back("ln_f.weight", Shape{8});
  p.emplace_back("ln_f.bias", Shape{8});
  return p;
}

bool is_conv1d(const std::string& name) {
  return name.find("c_attn.weight") != std::string::npos || name.find("c_proj.weight") != std::string::npos ||
         name.find("c_fc.weight") != std::string::npos;
}

// Tensor k holds k * 10000 + its flat index: exact in float32 and every value tells where it came from.
StateDict tiny_state() {
  StateDict s;
  int k = 0;
  for (const auto& [name, shape] : tiny_params()) {
    Tensor t = arange(0, shape.numel(), 1, {.dtype = DType::Float32}).view(shape);
    s[name] = add(t, scalar_tensor(10000.0 * ++k));
  }
  return s;
}

void expect_same_state(const StateDict& a, const StateDict& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    ASSERT_TRUE(b.contains(name)) << name;
    EXPECT_EQ(b.at(name).shape(), t.shape()) << name;
    EXPECT_EQ(b.at(name).dtype(), DType::Float32) << name;
    if (b.at(name).shape() == t.shape()) {
      EXPECT_EQ(b.at(name).to_vector<float>(), t.to_vector<float>()) << name;
    }
  }
}

}  // namespace

TEST(HfGpt2, ExportWritesHfLayoutAndConfig) {
  TempDir dir;
  const std::string out = dir.file("export");  // created by the exporter
  StateDict state = tiny_state();
  export_gpt2_safetensors(out, state, kTiny);

  SafetensorsFile file = load_safetensors(out + "/model.safetensors");
  EXPECT_EQ(file.metadata, (Metadata{{"format", "pt"}}));  // transformers requires it
  ASSERT_EQ(file.tensors.size(), tiny_params().size());
  for (const auto& [name, shape] : tiny_params()) {
    const Tensor& t = file.tensors.at(name);
    EXPECT_EQ(t.dtype(), DType::Float32) << name;
    EXPECT_EQ(t.shape(), is_conv1d(name) ? Shape({shape[1], shape[0]}) : shape) << name;
  }
  // HF Conv1D weight [in, out]: element (i, o) is strata's (o, i).
  const std::vector<float> hf = file.tensors.at("h.1.attn.c_attn.weight").to_vector<float>();
  const std::vector<float> ours = state.at("h.1.attn.c_attn.weight").to_vector<float>();
  for (int i = 0; i < 8; ++i)
    for (int o = 0; o < 24; ++o) ASSERT_EQ(hf[i * 24 + o], ours[o * 8 + i]) << i << "," << o;
  EXPECT_EQ(file.tensors.at("wte.weight").to_vector<float>(), state.at("wte.weight").to_vector<float>());

  auto config = nlohmann::json::parse(read_bytes(out + "/config.json"));
  EXPECT_EQ(config["model_type"], "gpt2");
  EXPECT_EQ(config["architectures"], nlohmann::json::array({"GPT2LMHeadModel"}));
  EXPECT_EQ(config["vocab_size"], 11);
  EXPECT_EQ(config["n_positions"], 8);
  EXPECT_EQ(config["n_ctx"], 8);
  EXPECT_EQ(config["n_embd"], 8);
  EXPECT_EQ(config["n_layer"], 2);
  EXPECT_EQ(config["n_head"], 2);
  EXPECT_TRUE(config["n_inner"].is_null());
  EXPECT_EQ(config["activation_function"], "gelu_new");
  EXPECT_EQ(config["layer_norm_epsilon"], 1e-5);
  EXPECT_EQ(config["resid_pdrop"], 0.0);
  EXPECT_EQ(config["tie_word_embeddings"], true);
  EXPECT_FALSE(config.contains("bos_token_id"));  // not GPT-2's tokenizer at vocab 11
}

TEST(HfGpt2, ExportImportRoundTrip) {
  TempDir dir;
  StateDict state = tiny_state();
  Gpt2Config cfg = kTiny;
  cfg.dropout = 0.1;
  export_gpt2_safetensors(dir.path().string(), state, cfg);
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"config.json", "model.safetensors"}));
  Gpt2Config back;
  StateDict imported = import_gpt2_safetensors(dir.path().string(), &back);
  expect_same_state(state, imported);
  EXPECT_EQ(back.vocab_size, 11);
  EXPECT_EQ(back.n_positions, 8);
  EXPECT_EQ(back.n_embd, 8);
  EXPECT_EQ(back.n_layer, 2);
  EXPECT_EQ(back.n_head, 2);
  EXPECT_EQ(back.dropout, 0.1);
  for (const auto& [name, t] : imported) EXPECT_TRUE(t.is_contiguous()) << name;
}

// Files saved by transformers' GPT2LMHeadModel carry "transformer." names and sometimes
// lm_head.weight and the attention-mask buffers; other dtypes are converted to float32.
TEST(HfGpt2, ImportAcceptsHfVariants) {
  TempDir dir;
  StateDict state = tiny_state();
  export_gpt2_safetensors(dir.file("a"), state, kTiny);
  SafetensorsFile file = load_safetensors(dir.file("a/model.safetensors"));
  StateDict hf;
  for (const auto& [name, t] : file.tensors) hf["transformer." + name] = t;
  hf["transformer.wpe.weight"] = hf["transformer.wpe.weight"].to(DType::Float64);
  hf["lm_head.weight"] = file.tensors.at("wte.weight");
  hf["transformer.h.0.attn.bias"] = ones({1, 1, 8, 8});
  hf["transformer.h.1.attn.masked_bias"] = scalar_tensor(-1e4);
  std::filesystem::create_directories(dir.file("b"));
  save_safetensors(dir.file("b/model.safetensors"), hf, {{"format", "pt"}});
  std::filesystem::copy_file(dir.file("a/config.json"), dir.file("b/config.json"));
  expect_same_state(state, import_gpt2_safetensors(dir.file("b")));
}

TEST(HfGpt2, ExportErrorsNameTheTensor) {
  TempDir dir;
  const std::string out = dir.path().string();
  StateDict missing = tiny_state();
  missing.erase("h.1.mlp.c_fc.bias");
  EXPECT_CONTAINS(error_of([&] { export_gpt2_safetensors(out, missing, kTiny); }),
                  "model_state has no tensor 'h.1.mlp.c_fc.bias' (expected shape [32])");

  StateDict hf_layout = tiny_state();
  hf_layout["h.0.attn.c_attn.weight"] = zeros({8, 24});
  EXPECT_CONTAINS(error_of([&] { export_gpt2_safetensors(out, hf_layout, kTiny); }),
                  "tensor 'h.0.attn.c_attn.weight' has shape [8, 24], expected [24, 8]");

  StateDict extra = tiny_state();
  extra["h.2.ln_1.weight"] = zeros({8});
  EXPECT_CONTAINS(error_of([&] { export_gpt2_safetensors(out, extra, kTiny); }), "unexpected tensor 'h.2.ln_1.weight'");

  StateDict ints = tiny_state();
  ints["ln_f.bias"] = zeros({8}, {.dtype = DType::Int64});
  EXPECT_CONTAINS(error_of([&] { export_gpt2_safetensors(out, ints, kTiny); }), "'ln_f.bias' has dtype int64");

  Gpt2Config bad = kTiny;
  bad.n_head = 3;
  EXPECT_CONTAINS(error_of([&] { export_gpt2_safetensors(out, tiny_state(), bad); }), "not divisible by n_head=3");
  EXPECT_TRUE(dir.entries().empty());  // nothing written by the failed exports

  StateDict tied = tiny_state();
  tied["lm_head.weight"] = tied["wte.weight"];  // a tied head is skipped, not an error
  export_gpt2_safetensors(out, tied, kTiny);
  EXPECT_FALSE(load_safetensors(dir.file("model.safetensors")).tensors.contains("lm_head.weight"));
}

TEST(HfGpt2, ImportErrorsNameTheTensorOrField) {
  TempDir dir;
  const std::string d = dir.path().string();
  EXPECT_CONTAINS(error_of([&] { import_gpt2_safetensors(d); }), dir.file("config.json"));
  export_gpt2_safetensors(d, tiny_state(), kTiny);
  SafetensorsFile file = load_safetensors(dir.file("model.safetensors"));
  const std::string config = read_bytes(dir.file("config.json"));

  StateDict t = file.tensors;
  t.erase("ln_f.bias");
  save_safetensors(dir.file("model.safetensors"), t);
  EXPECT_CONTAINS(error_of([&] { import_gpt2_safetensors(d); }), "missing tensor 'ln_f.bias'");

  t = file.tensors;
  t["h.1.mlp.c_proj.weight"] = zeros({8, 32});  // strata layout where HF's is expected
  save_safetensors(dir.file("model.safetensors"), t);
  EXPECT_CONTAINS(error_of([&] { import_gpt2_safetensors(d); }),
                  "tensor 'h.1.mlp.c_proj.weight' has shape [8, 32], expected [32, 8] (HF Conv1D layout [in, out])");

  t = file.tensors;
  t["h.0.mlp.extra"] = zeros({8});
  save_safetensors(dir.file("model.safetensors"), t);
  EXPECT_CONTAINS(error_of([&] { import_gpt2_safetensors(d); }), "unexpected tensor 'h.0.mlp.extra'");

  save_safetensors(dir.file("model.safetensors"), file.tensors);
  auto cfg = nlohmann::json::parse(config);
  cfg["n_layer"] = 3;
  write_bytes(dir.file("config.json"), cfg.dump());
  EXPECT_CONTAINS(error_of([&] { import_gpt2_safetensors(d); }),
                  "config.json's n_layer 3 does not match the file's 2 layers ('h.0.' to 'h.1.')");
  cfg["n_layer"] = 2;
  cfg["activation_function"] = "relu";
  write_bytes(dir.file("config.json"), cfg.dump());
  EXPECT_CONTAINS(error_of([&] { import_gpt2_safetensors(d); }), "activation_function \"relu\"");
  cfg["activation_function"] = "gelu_new";
  cfg["n_embd"] = "eight";
  write_bytes(dir.file("config.json"), cfg.dump());
  EXPECT_CONTAINS(error_of([&] { import_gpt2_safetensors(d); }), "field \"n_embd\" must be an integer");
  write_bytes(dir.file("config.json"), "{\"vocab_size\": 11,");
  EXPECT_CONTAINS(error_of([&] { import_gpt2_safetensors(d); }), "is not valid JSON");
  write_bytes(dir.file("config.json"), config);
  expect_same_state(tiny_state(), import_gpt2_safetensors(d));  // and the original still imports
}

// Python with json + struct alone finds the HF names, dtypes, [in, out] Conv1D layout and config.
TEST(HfGpt2, PythonReadsExport) {
  if (!std::filesystem::exists(strata::testing::kPython)) GTEST_SKIP() << "/usr/bin/python3 is missing";
  TempDir dir;
  StateDict state = tiny_state();
  export_gpt2_safetensors(dir.path().string(), state, kTiny);
  nlohmann::json expect = {
      {"file", dir.file("model.safetensors")}, {"metadata", {{"format", "pt"}}}, {"tensors", nlohmann::json::object()}};
  for (const auto& [name, shape] : tiny_params()) {
    const std::vector<float> values = state.at(name).to_vector<float>();
    if (is_conv1d(name)) {
      expect["tensors"][name] = {{"dtype", "F32"}, {"shape", {shape[1], shape[0]}}, {"transpose_of", values}};
    } else {
      expect["tensors"][name] = {{"dtype", "F32"}, {"shape", shape.vec()}, {"values", values}};
    }
  }
  expect["config"] = {{"path", dir.file("config.json")},
                      {"expect",
                       {{"model_type", "gpt2"},
                        {"architectures", {"GPT2LMHeadModel"}},
                        {"vocab_size", 11},
                        {"n_positions", 8},
                        {"n_ctx", 8},
                        {"n_embd", 8},
                        {"n_layer", 2},
                        {"n_head", 2},
                        {"n_inner", nullptr},
                        {"activation_function", "gelu_new"},
                        {"layer_norm_epsilon", 1e-5},
                        {"tie_word_embeddings", true}}}};
  write_bytes(dir.file("expect.json"), expect.dump());
  std::string output;
  const int rc =
      strata::testing::run_python_script("unit/checkpoint/read_safetensors.py", {dir.file("expect.json")}, &output);
  EXPECT_EQ(rc, 0) << output;
  EXPECT_CONTAINS(output, "OK (28 tensors");
}

namespace {

// An exported tiny directory whose file (by HF name) and config.json a test then edits.
struct Gpt2Dir {
  TempDir tmp;
  std::string dir = tmp.path().string();
  StateDict file;
  nlohmann::json config;
  Gpt2Dir() {
    export_gpt2_safetensors(dir, tiny_state(), kTiny);
    file = load_safetensors(tmp.file("model.safetensors")).tensors;
    config = nlohmann::json::parse(read_bytes(tmp.file("config.json")));
  }
  void write(const StateDict& tensors, const nlohmann::json& cfg) const {
    save_safetensors(tmp.file("model.safetensors"), tensors, {{"format", "pt"}});
    write_bytes(tmp.file("config.json"), cfg.dump());
  }
  std::string import_error() const {
    return error_of([&] { import_gpt2_safetensors(dir); });
  }
  std::string config_where() const { return "GPT-2 config '" + tmp.file("config.json") + "'"; }
};

}  // namespace

// strata's GPT computes its logits with wte. transformers 5 resolves the head from
// tie_word_embeddings and the file: a head that is not wte must be refused, by field name.
TEST(HfGpt2, ImportResolvesTheHeadAsTransformersAndRefusesASeparateOne) {
  Gpt2Dir d;
  StateDict hf = d.file;
  hf["lm_head.weight"] = hf.at("wte.weight");  // tied, and the file carries the same head
  d.write(hf, d.config);
  expect_same_state(tiny_state(), import_gpt2_safetensors(d.dir));

  hf.erase("wte.weight");  // tied with only the head in the file: transformers ties wte to it
  d.write(hf, d.config);
  expect_same_state(tiny_state(), import_gpt2_safetensors(d.dir));

  hf = d.file;
  hf["lm_head.weight"] = zeros({11, 8});  // tied in the config, yet a head of its own
  d.write(hf, d.config);
  std::string error = d.import_error();
  EXPECT_CONTAINS(error, "'lm_head.weight' differs from 'wte.weight'");
  EXPECT_CONTAINS(error, "tie_word_embeddings is true");

  nlohmann::json untied = d.config;
  untied["tie_word_embeddings"] = false;
  d.write(hf, untied);
  error = d.import_error();
  EXPECT_CONTAINS(error, d.config_where() + ": tie_word_embeddings is false");
  EXPECT_CONTAINS(error, "strata's GPT ties its output head to the token embedding");
  hf.erase("lm_head.weight");
  d.write(hf, untied);
  EXPECT_CONTAINS(d.import_error(), "tie_word_embeddings is false but the file has no 'lm_head.weight'");
  hf["lm_head.weight"] = hf.at("wte.weight");  // untied, but the head is the embedding: representable
  d.write(hf, untied);
  expect_same_state(tiny_state(), import_gpt2_safetensors(d.dir));
}

// Config fields that change what GPT-2 computes: honoured or refused by name, never ignored.
TEST(HfGpt2, ImportRefusesConfigsStrataCannotCompute) {
  Gpt2Dir d;
  auto error_with = [&](const char* key, const nlohmann::json& value) {
    nlohmann::json cfg = d.config;
    cfg[key] = value;
    d.write(d.file, cfg);
    return d.import_error();
  };
  const std::string where = d.config_where();
  EXPECT_CONTAINS(error_with("scale_attn_weights", false), where + ": scale_attn_weights false is not supported");
  EXPECT_CONTAINS(error_with("scale_attn_by_inverse_layer_idx", true),
                  where + ": scale_attn_by_inverse_layer_idx true is not supported");
  EXPECT_CONTAINS(error_with("add_cross_attention", true), where + ": add_cross_attention true is not supported");
  EXPECT_CONTAINS(error_with("scale_attn_weights", "yes"), "field \"scale_attn_weights\" must be true or false");
  EXPECT_CONTAINS(error_with("layer_norm_epsilon", 1e-6), "layer_norm_epsilon 1e-06 differs from the 1e-5");
  EXPECT_CONTAINS(error_with("n_inner", 16), "n_inner 16 is not 4 * n_embd");
  EXPECT_CONTAINS(error_with("activation_function", "gelu"), "activation_function \"gelu\"");
  // Only the order and precision of the float32 score computation: the same model.
  nlohmann::json cfg = d.config;
  cfg["reorder_and_upcast_attn"] = true;
  d.write(d.file, cfg);
  expect_same_state(tiny_state(), import_gpt2_safetensors(d.dir));
}

// Sizes in config.json are checked against the file's tensors, naming the field, before
// anything is allocated in proportion to them.
TEST(HfGpt2, ImportChecksConfigSizesAgainstTheFileFirst) {
  Gpt2Dir d;
  const std::string where = "import_gpt2_safetensors '" + d.tmp.file("model.safetensors") + "'";
  auto error_with = [&](const char* key, const nlohmann::json& value) {
    nlohmann::json cfg = d.config;
    cfg[key] = value;
    d.write(d.file, cfg);
    return d.import_error();
  };
  EXPECT_CONTAINS(error_with("n_layer", 1000000000),
                  where + ": config.json's n_layer 1000000000 does not match the file's 2 layers ('h.0.' to 'h.1.')");
  EXPECT_CONTAINS(error_with("n_layer", 18446744073709551615ull),
                  "field \"n_layer\" is 18446744073709551615, beyond the largest integer strata reads");
  EXPECT_CONTAINS(error_with("vocab_size", 50257),
                  where +
                      ": config.json's vocab_size 50257 and n_embd 8 give 'wte.weight' the shape [50257, 8], "
                      "but the file's is [11, 8]");
  EXPECT_CONTAINS(error_with("n_positions", 1024), "config.json's n_positions 1024 and n_embd 8 give 'wpe.weight'");
  EXPECT_CONTAINS(error_with("n_embd", 4096), "config.json's vocab_size 11 and n_embd 4096 give 'wte.weight'");
  StateDict no_layers = d.file;
  for (const auto& [name, t] : d.file)
    if (name.starts_with("h.")) no_layers.erase(name);
  d.write(no_layers, d.config);
  EXPECT_CONTAINS(d.import_error(), "config.json's n_layer 2 does not match the file's 0 layers");
}
