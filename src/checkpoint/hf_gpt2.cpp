#include "strata/checkpoint/hf_gpt2.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <system_error>
#include <vector>

#include "checkpoint/posix_file.h"
#include "strata/autograd/grad_mode.h"
#include "strata/checkpoint/atomic_file.h"
#include "strata/checkpoint/safetensors.h"

namespace strata::checkpoint {
namespace {

using nlohmann::json;

struct ParamSpec {
  std::string name;
  Shape shape;          // strata's layout
  bool conv1d = false;  // HF stores it transposed, [in, out]
  Shape hf_shape() const { return conv1d ? Shape{shape[1], shape[0]} : shape; }
};

std::vector<ParamSpec> gpt2_params(const Gpt2Config& c) {
  const int64_t C = c.n_embd;
  std::vector<ParamSpec> p = {{"wte.weight", {c.vocab_size, C}}, {"wpe.weight", {c.n_positions, C}}};
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string h = "h." + std::to_string(i) + ".";
    p.push_back({h + "ln_1.weight", {C}});
    p.push_back({h + "ln_1.bias", {C}});
    p.push_back({h + "attn.c_attn.weight", {3 * C, C}, true});
    p.push_back({h + "attn.c_attn.bias", {3 * C}});
    p.push_back({h + "attn.c_proj.weight", {C, C}, true});
    p.push_back({h + "attn.c_proj.bias", {C}});
    p.push_back({h + "ln_2.weight", {C}});
    p.push_back({h + "ln_2.bias", {C}});
    p.push_back({h + "mlp.c_fc.weight", {4 * C, C}, true});
    p.push_back({h + "mlp.c_fc.bias", {4 * C}});
    p.push_back({h + "mlp.c_proj.weight", {C, 4 * C}, true});
    p.push_back({h + "mlp.c_proj.bias", {C}});
  }
  p.push_back({"ln_f.weight", {C}});
  p.push_back({"ln_f.bias", {C}});
  return p;
}

void check_config(const Gpt2Config& c, const std::string& where) {
  STRATA_CHECK(c.vocab_size > 0 && c.n_positions > 0 && c.n_embd > 0 && c.n_layer > 0 && c.n_head > 0, where,
               ": GPT-2 config needs positive sizes, got vocab_size=", c.vocab_size, " n_positions=", c.n_positions,
               " n_embd=", c.n_embd, " n_layer=", c.n_layer, " n_head=", c.n_head);
  STRATA_CHECK(c.n_embd % c.n_head == 0, where, ": n_embd=", c.n_embd, " is not divisible by n_head=", c.n_head);
  STRATA_CHECK(c.dropout >= 0.0 && c.dropout < 1.0, where, ": dropout ", c.dropout, " is not in [0, 1)");
}

// HF GPT-2 attention-mask buffers ("h.3.attn.bias", "h.3.attn.masked_bias"): not parameters.
bool is_attention_buffer(const std::string& name) {
  if (name.rfind("h.", 0) != 0) return false;
  const size_t dot = name.find('.', 2);
  if (dot == std::string::npos) return false;
  const std::string rest = name.substr(dot + 1);
  return rest == "attn.bias" || rest == "attn.masked_bias";
}

json config_json(const Gpt2Config& c) {
  json j = {
      {"model_type", "gpt2"},
      {"architectures", {"GPT2LMHeadModel"}},
      {"vocab_size", c.vocab_size},
      {"n_positions", c.n_positions},
      {"n_ctx", c.n_positions},
      {"n_embd", c.n_embd},
      {"n_layer", c.n_layer},
      {"n_head", c.n_head},
      {"n_inner", nullptr},  // 4 * n_embd
      {"activation_function", "gelu_new"},
      {"layer_norm_epsilon", 1e-5},
      {"resid_pdrop", c.dropout},
      {"embd_pdrop", c.dropout},
      {"attn_pdrop", c.dropout},
      {"summary_first_dropout", c.dropout},
      {"initializer_range", 0.02},
      {"scale_attn_weights", true},
      {"scale_attn_by_inverse_layer_idx", false},
      {"reorder_and_upcast_attn", false},
      {"tie_word_embeddings", true},
      {"use_cache", true},
      {"torch_dtype", "float32"},
  };
  // GPT-2's tokenizer puts <|endoftext|> at 50256; other vocabularies keep HF's defaults.
  if (c.vocab_size > 50256) {
    j["bos_token_id"] = 50256;
    j["eos_token_id"] = 50256;
  }
  return j;
}

int64_t config_int(const json& j, const char* key, const std::string& path) {
  auto it = j.find(key);
  STRATA_CHECK(it != j.end(), "GPT-2 config '", path, "': missing field \"", key, "\"");
  STRATA_CHECK(it->is_number_integer(), "GPT-2 config '", path, "': field \"", key, "\" must be an integer, found ",
               it->dump());
  return it->get<int64_t>();
}

Gpt2Config read_config(const std::string& path) {
  json j;
  try {
    j = json::parse(detail::read_text_file(path));
  } catch (const json::exception& ex) {
    STRATA_FAIL("GPT-2 config '", path, "' is not valid JSON: ", ex.what());
  }
  STRATA_CHECK(j.is_object(), "GPT-2 config '", path, "' must be a JSON object");
  if (j.contains("model_type")) {
    STRATA_CHECK(j["model_type"] == "gpt2", "GPT-2 config '", path, "': model_type is ", j["model_type"].dump(),
                 ", expected \"gpt2\"");
  }
  // Architecture choices Gpt2Config cannot express: refuse rather than compute something else.
  if (j.contains("activation_function")) {
    const json& act = j["activation_function"];
    STRATA_CHECK(act == "gelu_new" || act == "gelu_pytorch_tanh", "GPT-2 config '", path,
                 "': activation_function ", act.dump(), " is not the tanh GELU strata's GPT uses");
  }
  if (j.contains("n_inner") && !j["n_inner"].is_null()) {
    STRATA_CHECK(j["n_inner"] == 4 * config_int(j, "n_embd", path), "GPT-2 config '", path, "': n_inner ",
                 j["n_inner"].dump(), " is not 4 * n_embd");
  }
  if (j.contains("layer_norm_epsilon")) {
    const json& eps = j["layer_norm_epsilon"];
    STRATA_CHECK(eps.is_number() && eps.get<double>() == 1e-5, "GPT-2 config '", path, "': layer_norm_epsilon ",
                 eps.dump(), " differs from the 1e-5 strata's GPT uses");
  }
  Gpt2Config c;
  c.vocab_size = config_int(j, "vocab_size", path);
  c.n_positions = j.contains("n_positions") ? config_int(j, "n_positions", path) : config_int(j, "n_ctx", path);
  c.n_embd = config_int(j, "n_embd", path);
  c.n_layer = config_int(j, "n_layer", path);
  c.n_head = config_int(j, "n_head", path);
  if (j.contains("resid_pdrop")) {
    STRATA_CHECK(j["resid_pdrop"].is_number(), "GPT-2 config '", path, "': resid_pdrop must be a number");
    c.dropout = j["resid_pdrop"].get<double>();
  }
  check_config(c, "GPT-2 config '" + path + "'");
  return c;
}

}  // namespace

void export_gpt2_safetensors(const std::string& dir, const StateDict& model_state, const Gpt2Config& config) {
  const std::string where = "export_gpt2_safetensors '" + dir + "'";
  check_config(config, where);
  NoGradGuard no_grad;
  const std::vector<ParamSpec> specs = gpt2_params(config);
  StateDict out;
  for (const ParamSpec& p : specs) {
    auto it = model_state.find(p.name);
    STRATA_CHECK(it != model_state.end(), where, ": model_state has no tensor '", p.name, "' (expected shape ",
                 p.shape, ")");
    const Tensor& t = it->second;
    STRATA_CHECK(t.defined(), where, ": tensor '", p.name, "' is undefined");
    STRATA_CHECK(t.shape() == p.shape, where, ": tensor '", p.name, "' has shape ", t.shape(), ", expected ", p.shape,
                 p.conv1d ? " (strata Linear layout [out, in])" : "");
    STRATA_CHECK(is_floating(t.dtype()), where, ": tensor '", p.name, "' has dtype ", t.dtype(),
                 ", expected a floating type");
    Tensor f = t.to(DType::Float32);
    out.emplace(p.name, p.conv1d ? f.transpose(0, 1) : f);  // written contiguously by the saver
  }
  if (model_state.size() != out.size()) {
    for (const auto& [name, t] : model_state) {
      STRATA_CHECK(out.contains(name) || name == "lm_head.weight", where, ": unexpected tensor '", name,
                   "' in model_state (not a GPT-2 parameter for n_layer=", config.n_layer, ")");
    }
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  STRATA_CHECK(!ec, where, ": cannot create the directory: ", ec.message());
  // transformers refuses safetensors files whose metadata lacks format "pt".
  save_safetensors((std::filesystem::path(dir) / "model.safetensors").string(), out, {{"format", "pt"}});
  write_file_atomic((std::filesystem::path(dir) / "config.json").string(), config_json(config).dump(2) + "\n");
}

StateDict import_gpt2_safetensors(const std::string& dir, Gpt2Config* config_out) {
  const std::string config_path = (std::filesystem::path(dir) / "config.json").string();
  const std::string model_path = (std::filesystem::path(dir) / "model.safetensors").string();
  const Gpt2Config config = read_config(config_path);
  const std::string where = "import_gpt2_safetensors '" + model_path + "'";

  SafetensorsFile file = load_safetensors(model_path);
  StateDict by_name;  // prefix stripped
  for (auto& [name, t] : file.tensors) {
    const std::string key = name.rfind("transformer.", 0) == 0 ? name.substr(12) : name;
    if (key == "lm_head.weight" || is_attention_buffer(key)) continue;  // tied / not a parameter
    STRATA_CHECK(!by_name.contains(key), where, ": tensor '", key, "' appears both with and without \"transformer.\"");
    by_name.emplace(key, t);
  }

  NoGradGuard no_grad;
  StateDict out;
  for (const ParamSpec& p : gpt2_params(config)) {
    auto it = by_name.find(p.name);
    STRATA_CHECK(it != by_name.end(), where, ": missing tensor '", p.name, "' (expected shape ", p.hf_shape(), ")");
    const Tensor& t = it->second;
    STRATA_CHECK(t.shape() == p.hf_shape(), where, ": tensor '", p.name, "' has shape ", t.shape(), ", expected ",
                 p.hf_shape(), p.conv1d ? " (HF Conv1D layout [in, out])" : "");
    STRATA_CHECK(is_floating(t.dtype()), where, ": tensor '", p.name, "' has dtype ", t.dtype(),
                 ", expected a floating type");
    Tensor f = t.to(DType::Float32);
    out.emplace(p.name, p.conv1d ? f.transpose(0, 1).contiguous() : f);
  }
  for (const auto& [name, t] : by_name) {
    STRATA_CHECK(out.contains(name), where, ": unexpected tensor '", name, "' (not a GPT-2 parameter for n_layer=",
                 config.n_layer, ")");
  }
  if (config_out) *config_out = config;
  return out;
}

}  // namespace strata::checkpoint
