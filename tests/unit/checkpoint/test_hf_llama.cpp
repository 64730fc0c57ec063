// Hugging Face LlamaForCausalLM export/import (model.safetensors + config.json).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <tuple>

#include "file_test_util.h"
#include "strata/checkpoint/hf_llama.h"
#include "strata/checkpoint/safetensors.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using namespace strata::checkpoint;
using nlohmann::json;
using strata::testing::error_of;
using strata::testing::read_bytes;
using strata::testing::TempDir;
using strata::testing::write_bytes;

namespace {

// 4 query heads sharing 2 key/value heads of head_dim 4.
const HfLlamaConfig kSmall{.vocab_size = 11,
                           .context = 8,
                           .n_layer = 2,
                           .n_head = 4,
                           .n_kv_head = 2,
                           .n_embd = 16,
                           .intermediate_size = 24,
                           .rope_theta = 500000.0,
                           .rms_norm_eps = 1e-5,
                           .init_std = 0.01};

// HF file name -> shape, written out by hand (not derived from the code under test).
std::map<std::string, Shape> hf_names_and_shapes() {
  std::map<std::string, Shape> m = {
      {"model.embed_tokens.weight", {11, 16}}, {"model.norm.weight", {16}}, {"lm_head.weight", {11, 16}}};
  for (const std::string layer : {"model.layers.0.", "model.layers.1."}) {
    m[layer + "input_layernorm.weight"] = {16};
    m[layer + "self_attn.q_proj.weight"] = {16, 16};
    m[layer + "self_attn.k_proj.weight"] = {8, 16};
    m[layer + "self_attn.v_proj.weight"] = {8, 16};
    m[layer + "self_attn.o_proj.weight"] = {16, 16};
    m[layer + "post_attention_layernorm.weight"] = {16};
    m[layer + "mlp.gate_proj.weight"] = {24, 16};
    m[layer + "mlp.up_proj.weight"] = {24, 16};
    m[layer + "mlp.down_proj.weight"] = {16, 24};
  }
  return m;
}

std::string strata_name(const std::string& hf_name) {
  return hf_name.starts_with("model.") ? hf_name.substr(6) : hf_name;
}

// Tensor k (in name order) holds k * 1000 + its flat index: exact in float32, and every
// value tells where it came from.
StateDict numbered_state() {
  StateDict s;
  double k = 0;
  for (const auto& [hf_name, shape] : hf_names_and_shapes()) {
    s[strata_name(hf_name)] =
        add(arange(0, shape.numel(), 1, {.dtype = DType::Float32}).view(shape), scalar_tensor(1000.0 * ++k));
  }
  return s;
}

void expect_equal_states(const StateDict& got, const StateDict& want) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, w] : want) {
    auto it = got.find(name);
    ASSERT_NE(it, got.end()) << name;
    ASSERT_EQ(it->second.dtype(), DType::Float32) << name;
    ASSERT_EQ(it->second.shape(), w.shape()) << name;
    EXPECT_EQ(it->second.to_vector<float>(), w.to_vector<float>()) << name;
  }
}

nn::LlamaConfig nn_config(const HfLlamaConfig& c) {
  return {.vocab_size = c.vocab_size,
          .context = c.context,
          .n_layer = c.n_layer,
          .n_head = c.n_head,
          .n_kv_head = c.n_kv_head,
          .n_embd = c.n_embd,
          .intermediate_size = c.intermediate_size,
          .rope_theta = c.rope_theta,
          .rms_norm_eps = c.rms_norm_eps,
          .init_std = c.init_std};
}

// An exported directory whose file and config a test then edits.
struct Exported {
  TempDir tmp;
  std::string dir = tmp.path().string();
  StateDict file;  // by HF name
  json config;
  Exported() {
    export_llama_safetensors(dir, numbered_state(), kSmall);
    file = load_safetensors(tmp.file("model.safetensors")).tensors;
    config = json::parse(read_bytes(tmp.file("config.json")));
  }
  void write(const StateDict& tensors, const json& cfg) const {
    save_safetensors(tmp.file("model.safetensors"), tensors, {{"format", "pt"}});
    write_bytes(tmp.file("config.json"), cfg.dump());
  }
  std::string import_error() const {
    return error_of([&] { import_llama_safetensors(dir); });
  }
};

}  // namespace

TEST(HfLlama, ExportWritesHfNamesShapesAndConfig) {
  Exported e;
  const StateDict state = numbered_state();
  SafetensorsFile file = load_safetensors(e.tmp.file("model.safetensors"));
  EXPECT_EQ(file.metadata, (Metadata{{"format", "pt"}}));
  std::map<std::string, Shape> shapes;
  for (const auto& [name, t] : file.tensors) {
    shapes[name] = t.shape();
    EXPECT_EQ(t.dtype(), DType::Float32) << name;
    EXPECT_EQ(t.to_vector<float>(), state.at(strata_name(name)).to_vector<float>()) << name;  // same layout
  }
  EXPECT_EQ(shapes, hf_names_and_shapes());

  const json expected = {{"model_type", "llama"},
                         {"architectures", {"LlamaForCausalLM"}},
                         {"vocab_size", 11},
                         {"hidden_size", 16},
                         {"intermediate_size", 24},
                         {"num_hidden_layers", 2},
                         {"num_attention_heads", 4},
                         {"num_key_value_heads", 2},
                         {"head_dim", 4},
                         {"max_position_embeddings", 8},
                         {"rope_theta", 500000.0},
                         {"rope_scaling", nullptr},
                         {"rms_norm_eps", 1e-5},
                         {"hidden_act", "silu"},
                         {"initializer_range", 0.01},
                         {"tie_word_embeddings", false},
                         {"attention_bias", false},
                         {"mlp_bias", false},
                         {"torch_dtype", "float32"}};
  for (const auto& [key, value] : expected.items()) EXPECT_EQ(e.config[key], value) << key;
  EXPECT_EQ(e.tmp.entries(), (std::vector<std::string>{"config.json", "model.safetensors"}));  // no temporaries
}

TEST(HfLlama, RoundTripIsExact) {
  TempDir tmp;
  const StateDict state = numbered_state();
  export_llama_safetensors(tmp.file("out"), state, kSmall);  // creates the directory
  HfLlamaConfig back;
  const StateDict imported = import_llama_safetensors(tmp.file("out"), &back);
  expect_equal_states(imported, state);
  auto fields = [](const HfLlamaConfig& c) {
    return std::tuple(c.vocab_size, c.context, c.n_layer, c.n_head, c.n_kv_head, c.n_embd, c.intermediate_size,
                      c.rope_theta, c.rms_norm_eps, c.init_std);
  };
  EXPECT_EQ(fields(back), fields(kSmall));
}

// A seeded nn::Llama survives export + import bit for bit: a differently seeded model that
// loads the import gives the same logits.
TEST(HfLlama, ModelStateRoundTripGivesTheSameLogits) {
  TempDir tmp;
  nn::LlamaConfig cfg = nn_config(kSmall);
  cfg.seed = 9;
  nn::Llama a(cfg);
  export_llama_safetensors(tmp.path().string(), a.state_dict(), kSmall);
  cfg.seed = 10;
  nn::Llama b(cfg);
  b.load_state_dict(import_llama_safetensors(tmp.path().string()));
  Tensor tokens = from_vector<int64_t>({3, 1, 4, 1, 5, 9, 2, 6}, {1, 8});
  EXPECT_EQ(b.forward(tokens).to_vector<float>(), a.forward(tokens).to_vector<float>());
}

// What transformers may write: a tied head left out of the file, per-layer rotary inv_freq
// buffers (older versions), 16-bit weights, and transformers 5's config keys.
TEST(HfLlama, ImportAcceptsWhatTransformersWrites) {
  Exported e;
  StateDict hf = e.file;
  hf.erase("lm_head.weight");
  hf["model.layers.0.self_attn.rotary_emb.inv_freq"] = ones({2});
  hf["model.layers.1.self_attn.rotary_emb.inv_freq"] = ones({2});
  hf["model.layers.1.mlp.up_proj.weight"] = hf["model.layers.1.mlp.up_proj.weight"].to(DType::BFloat16);
  hf["model.norm.weight"] = hf["model.norm.weight"].to(DType::Float16);
  json cfg = e.config;
  cfg["tie_word_embeddings"] = true;
  cfg.erase("rope_theta");
  cfg.erase("rope_scaling");
  cfg.erase("torch_dtype");
  cfg["dtype"] = "bfloat16";
  cfg["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 500000.0}};
  e.write(hf, cfg);

  HfLlamaConfig back;
  const StateDict imported = import_llama_safetensors(e.dir, &back);
  StateDict want = numbered_state();
  want["lm_head.weight"] = want.at("embed_tokens.weight");
  for (const char* name : {"layers.1.mlp.up_proj.weight", "norm.weight"})  // rounded in the file
    want[name] = hf["model." + std::string(name)].to(DType::Float32);
  expect_equal_states(imported, want);
  EXPECT_EQ(back.rope_theta, 500000.0);
  // The copied head owns its storage: training it leaves the embedding alone.
  EXPECT_NE(imported.at("lm_head.weight").data<float>(), imported.at("embed_tokens.weight").data<float>());
  // Tied with a head in the file: that head is used (transformers 5 does the same).
  hf["lm_head.weight"] = zeros({11, 16});
  e.write(hf, cfg);
  EXPECT_EQ(import_llama_safetensors(e.dir).at("lm_head.weight").to_vector<float>(), std::vector<float>(11 * 16, 0.f));

  // transformers' defaults fill what a file leaves out: one kv head per head, rope_theta 1e4.
  cfg = e.config;
  cfg.erase("num_key_value_heads");
  cfg.erase("rope_theta");
  cfg.erase("head_dim");
  cfg["num_attention_heads"] = 2;  // head_dim 8: k/v projections are [16, 16]
  hf = e.file;
  for (const std::string l : {"model.layers.0.", "model.layers.1."}) {
    hf[l + "self_attn.k_proj.weight"] = zeros({16, 16});
    hf[l + "self_attn.v_proj.weight"] = zeros({16, 16});
  }
  e.write(hf, cfg);
  back = {};
  import_llama_safetensors(e.dir, &back);
  EXPECT_EQ(back.n_head, 2);
  EXPECT_EQ(back.n_kv_head, 2);
  EXPECT_EQ(back.rope_theta, 10000.0);
}

TEST(HfLlama, ExportErrorsNameTheTensorAndWriteNothing) {
  TempDir tmp;
  const std::string out = tmp.path().string();
  auto export_error = [&](const StateDict& s, const HfLlamaConfig& c = kSmall) {
    return error_of([&] { export_llama_safetensors(out, s, c); });
  };
  StateDict s = numbered_state();
  s.erase("layers.1.mlp.gate_proj.weight");
  EXPECT_CONTAINS(export_error(s),
                  "model_state has no tensor 'layers.1.mlp.gate_proj.weight' (expected shape [24, 16])");
  s = numbered_state();
  s["layers.0.self_attn.k_proj.weight"] = zeros({16, 16});  // one kv head per head
  EXPECT_CONTAINS(export_error(s), "tensor 'layers.0.self_attn.k_proj.weight' has shape [16, 16], expected [8, 16]");
  s = numbered_state();
  s["model.norm.weight"] = s.at("norm.weight");  // HF's name, not strata's
  EXPECT_CONTAINS(export_error(s), "unexpected tensor 'model.norm.weight' in model_state");
  s = numbered_state();
  s["layers.1.input_layernorm.weight"] = zeros({16}, {.dtype = DType::Int32});
  EXPECT_CONTAINS(export_error(s), "'layers.1.input_layernorm.weight' has dtype int32");
  HfLlamaConfig bad = kSmall;
  bad.n_kv_head = 3;
  EXPECT_CONTAINS(export_error(numbered_state(), bad),
                  "num_attention_heads (n_head) 4 is not divisible by num_key_value_heads (n_kv_head) 3");
  EXPECT_CONTAINS(export_error(numbered_state(), bad), "export_llama_safetensors '" + out + "'");
  EXPECT_TRUE(tmp.entries().empty());
}

TEST(HfLlama, ImportErrorsNameTheTensorAndTheFile) {
  Exported e;
  const std::string file = e.tmp.file("model.safetensors");
  StateDict t = e.file;
  t.erase("model.norm.weight");
  e.write(t, e.config);
  EXPECT_CONTAINS(e.import_error(), "import_llama_safetensors '" + file + "': missing tensor 'model.norm.weight'");

  t = e.file;
  t["model.layers.1.mlp.down_proj.weight"] = zeros({24, 16});
  e.write(t, e.config);
  EXPECT_CONTAINS(e.import_error(),
                  "tensor 'model.layers.1.mlp.down_proj.weight' has shape [24, 16], expected [16, 24]");

  t = e.file;
  t["model.layers.0.self_attn.q_proj.bias"] = zeros({16});
  e.write(t, e.config);
  EXPECT_CONTAINS(e.import_error(), "unexpected tensor 'model.layers.0.self_attn.q_proj.bias'");

  t = e.file;
  t.erase("lm_head.weight");  // untied: the head must be in the file
  e.write(t, e.config);
  EXPECT_CONTAINS(e.import_error(), "missing tensor 'lm_head.weight'");

  json cfg = e.config;
  cfg["num_hidden_layers"] = 3;
  e.write(e.file, cfg);
  EXPECT_CONTAINS(e.import_error(), "config.json's num_hidden_layers 3 does not match the file's 2 layers");
}

TEST(HfLlama, ImportRefusesConfigsStrataCannotCompute) {
  Exported e;
  const std::string where = "LLaMA config '" + e.tmp.file("config.json") + "'";
  auto error_with = [&](const char* key, const json& value) {
    json cfg = e.config;
    cfg[key] = value;
    e.write(e.file, cfg);
    return e.import_error();
  };
  EXPECT_CONTAINS(error_with("rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}}),
                  where + ": rope_scaling {\"factor\":2.0,\"rope_type\":\"linear\"} is not supported");
  EXPECT_CONTAINS(error_with("rope_parameters", {{"rope_type", "yarn"}, {"rope_theta", 500000.0}}),
                  "rope_parameters.rope_type \"yarn\" is not supported");
  EXPECT_CONTAINS(error_with("rope_parameters", {{"rope_type", "default"}, {"partial_rotary_factor", 0.5}}),
                  "rope_parameters.partial_rotary_factor (0.5) is not supported");
  EXPECT_CONTAINS(error_with("rope_parameters", {{"rope_theta", 10000.0}}),
                  "rope_parameters.rope_theta 10000.0 differs from rope_theta 500000");
  EXPECT_CONTAINS(error_with("hidden_act", "gelu"), where + ": hidden_act \"gelu\" is not supported");
  EXPECT_CONTAINS(error_with("attention_bias", true), "attention_bias true is not supported");
  EXPECT_CONTAINS(error_with("mlp_bias", true), "mlp_bias true is not supported");
  EXPECT_CONTAINS(error_with("head_dim", 8), "head_dim 8 is not hidden_size / num_attention_heads = 4");
  EXPECT_CONTAINS(error_with("model_type", "mistral"), "model_type is \"mistral\", expected \"llama\"");
  EXPECT_CONTAINS(error_with("hidden_size", "16"), "field \"hidden_size\" must be an integer");
  EXPECT_CONTAINS(error_with("tie_word_embeddings", "no"), "field \"tie_word_embeddings\" must be true or false");
  json cfg = e.config;
  cfg.erase("vocab_size");
  e.write(e.file, cfg);
  EXPECT_CONTAINS(e.import_error(), where + ": missing field \"vocab_size\"");
  write_bytes(e.tmp.file("config.json"), "[1, 2]");
  EXPECT_CONTAINS(e.import_error(), where + " must be a JSON object");
  std::filesystem::remove(e.tmp.file("config.json"));
  EXPECT_CONTAINS(e.import_error(), e.tmp.file("config.json"));
}

// Python with json + struct alone finds the HF names, shapes, values and config fields.
TEST(HfLlama, PythonReadsExport) {
  if (!std::filesystem::exists(strata::testing::kPython)) GTEST_SKIP() << "/usr/bin/python3 is missing";
  Exported e;
  const StateDict state = numbered_state();
  json expect = {
      {"file", e.tmp.file("model.safetensors")}, {"metadata", {{"format", "pt"}}}, {"tensors", json::object()}};
  for (const auto& [name, shape] : hf_names_and_shapes()) {
    expect["tensors"][name] = {
        {"dtype", "F32"}, {"shape", shape.vec()}, {"values", state.at(strata_name(name)).to_vector<float>()}};
  }
  expect["config"] = {{"path", e.tmp.file("config.json")},
                      {"expect", {{"model_type", "llama"}, {"num_key_value_heads", 2}, {"hidden_act", "silu"}}}};
  write_bytes(e.tmp.file("expect.json"), expect.dump());
  std::string output;
  const int rc =
      strata::testing::run_python_script("unit/checkpoint/read_safetensors.py", {e.tmp.file("expect.json")}, &output);
  EXPECT_EQ(rc, 0) << output;
  EXPECT_CONTAINS(output, "OK (21 tensors");
}

// Fields that change what LLaMA computes and that the importer used to ignore.
TEST(HfLlama, ImportRefusesPartialRotaryFactorAtTheTopLevel) {
  Exported e;
  json cfg = e.config;
  cfg["partial_rotary_factor"] = 0.5;  // transformers moves it into rope_parameters
  e.write(e.file, cfg);
  EXPECT_CONTAINS(e.import_error(),
                  "LLaMA config '" + e.tmp.file("config.json") + "': partial_rotary_factor 0.5 is not supported");
  cfg["partial_rotary_factor"] = 1.0;  // every dimension rotated: what strata does
  e.write(e.file, cfg);
  expect_equal_states(import_llama_safetensors(e.dir), numbered_state());
}

// A tied config whose file has the head but no embedding: transformers ties the embedding to it.
TEST(HfLlama, ImportTiesAMissingEmbeddingToTheHead) {
  Exported e;
  StateDict hf = e.file;
  hf["lm_head.weight"] = hf.at("model.embed_tokens.weight");
  hf.erase("model.embed_tokens.weight");
  json cfg = e.config;
  cfg["tie_word_embeddings"] = true;
  e.write(hf, cfg);
  const StateDict imported = import_llama_safetensors(e.dir);
  StateDict want = numbered_state();
  want["lm_head.weight"] = want.at("embed_tokens.weight");
  expect_equal_states(imported, want);
  EXPECT_NE(imported.at("lm_head.weight").data<float>(), imported.at("embed_tokens.weight").data<float>());
}

// Sizes in config.json are checked against the file's tensors, naming the field, before
// anything is allocated in proportion to them.
TEST(HfLlama, ImportChecksConfigSizesAgainstTheFileFirst) {
  Exported e;
  const std::string where = "import_llama_safetensors '" + e.tmp.file("model.safetensors") + "'";
  auto error_with = [&](const char* key, const json& value) {
    json cfg = e.config;
    cfg[key] = value;
    e.write(e.file, cfg);
    return e.import_error();
  };
  EXPECT_CONTAINS(error_with("num_hidden_layers", 1000000000),
                  where +
                      ": config.json's num_hidden_layers 1000000000 does not match the file's 2 layers "
                      "('model.layers.0.' to 'model.layers.1.')");
  EXPECT_CONTAINS(error_with("vocab_size", 32000),
                  where +
                      ": config.json's vocab_size 32000 and hidden_size 16 give 'model.embed_tokens.weight' the "
                      "shape [32000, 16], but the file's is [11, 16]");
  EXPECT_CONTAINS(error_with("intermediate_size", 11008),
                  "config.json's intermediate_size 11008 and hidden_size 16 give 'model.layers.0.mlp.up_proj.weight'");
  EXPECT_CONTAINS(error_with("num_key_value_heads", 4),
                  "config.json's num_key_value_heads 4, head_dim 4 and hidden_size 16 give "
                  "'model.layers.0.self_attn.k_proj.weight' the shape [16, 16], but the file's is [8, 16]");
}
