#include "strata/checkpoint/hf_llama.h"

#include <nlohmann/json.hpp>
#include <vector>

#include "checkpoint/hf_layout.h"
#include "checkpoint/hf_llama_layout.h"
#include "checkpoint/hf_vocab_padding.h"
#include "checkpoint/hf_weights.h"

namespace strata::checkpoint {
namespace {

using nlohmann::json;

// The MLP tensors of plain LLaMA, after "layers.<i>.".
std::vector<hf::NamedShape> llama_mlp(const HfLlamaConfig& c) {
  const int64_t C = c.n_embd, I = c.intermediate_size;
  return {{"mlp.gate_proj.weight", {I, C}}, {"mlp.up_proj.weight", {I, C}}, {"mlp.down_proj.weight", {C, I}}};
}

std::string what_params(const HfLlamaConfig& c) { return "LLaMA parameter for n_layer=" + std::to_string(c.n_layer); }

}  // namespace

namespace hf {

std::vector<TensorSpec> llama_layout(const HfLlamaConfig& c, const std::vector<NamedShape>& mlp) {
  const int64_t C = c.n_embd, D = c.n_embd / c.n_head;
  std::vector<TensorSpec> p;
  // HF's LlamaForCausalLM keeps everything but the head in its "model." submodule.
  auto add = [&p](const std::string& name, Shape shape) {
    p.push_back({name, name == "lm_head.weight" ? name : "model." + name, std::move(shape)});
  };
  add("embed_tokens.weight", {c.vocab_size, C});
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string l = "layers." + std::to_string(i) + ".";
    add(l + "input_layernorm.weight", {C});
    add(l + "self_attn.q_proj.weight", {c.n_head * D, C});
    add(l + "self_attn.k_proj.weight", {c.n_kv_head * D, C});
    add(l + "self_attn.v_proj.weight", {c.n_kv_head * D, C});
    add(l + "self_attn.o_proj.weight", {C, c.n_head * D});
    add(l + "post_attention_layernorm.weight", {C});
    for (const auto& [name, shape] : mlp) add(l + name, shape);
  }
  add("norm.weight", {C});
  add("lm_head.weight", {c.vocab_size, C});
  return p;
}

// Messages give the config.json key and, in parentheses, HfLlamaConfig's field.
void check_llama_fields(const HfLlamaConfig& c, const std::string& where) {
  STRATA_CHECK(c.vocab_size > 0 && c.context > 0 && c.n_layer > 0 && c.n_head > 0 && c.n_kv_head > 0 && c.n_embd > 0 &&
                   c.intermediate_size > 0,
               where, ": LLaMA config needs positive sizes, got vocab_size ", c.vocab_size,
               ", max_position_embeddings (context) ", c.context, ", num_hidden_layers (n_layer) ", c.n_layer,
               ", num_attention_heads (n_head) ", c.n_head, ", num_key_value_heads (n_kv_head) ", c.n_kv_head,
               ", hidden_size (n_embd) ", c.n_embd, ", intermediate_size ", c.intermediate_size);
  STRATA_CHECK(c.n_embd % c.n_head == 0 && (c.n_embd / c.n_head) % 2 == 0, where, ": hidden_size (n_embd) ", c.n_embd,
               " must be num_attention_heads (n_head) ", c.n_head, " times an even head_dim (rotary pairs)");
  STRATA_CHECK(c.n_head % c.n_kv_head == 0, where, ": num_attention_heads (n_head) ", c.n_head,
               " is not divisible by num_key_value_heads (n_kv_head) ", c.n_kv_head);
  STRATA_CHECK(c.rope_theta > 0.0 && c.rms_norm_eps > 0.0, where, ": rope_theta (", c.rope_theta,
               ") and rms_norm_eps (", c.rms_norm_eps, ") must be positive");
}

}  // namespace hf

namespace {

// Older transformers saved each layer's rotary inverse frequencies; they follow from
// rope_theta and head_dim, so they are not parameters.
bool is_rotary_buffer(const std::string& name) { return name.ends_with("rotary_emb.inv_freq"); }

}  // namespace

namespace hf {

json llama_config_json(const HfLlamaConfig& c, const char* model_type, const char* architecture) {
  // strata's head is its own tensor.
  json j = hf::common_config(model_type, architecture, c.vocab_size, /*tie_word_embeddings=*/false, c.init_std);
  j.update({
      {"hidden_size", c.n_embd},
      {"num_hidden_layers", c.n_layer},
      {"rms_norm_eps", c.rms_norm_eps},
      {"pretraining_tp", 1},
      // attention
      {"num_attention_heads", c.n_head},
      {"num_key_value_heads", c.n_kv_head},
      {"head_dim", c.n_embd / c.n_head},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      // MLP
      {"intermediate_size", c.intermediate_size},
      {"hidden_act", "silu"},
      {"mlp_bias", false},
      // positions
      {"max_position_embeddings", c.context},
      {"rope_theta", c.rope_theta},
      {"rope_scaling", nullptr},
  });
  return j;
}

}  // namespace hf

namespace {

// transformers 4 writes rope_theta (and rope_scaling); 5 writes rope_parameters
// {"rope_type", "rope_theta"}. Anything but plain rotary embeddings is refused.
double read_rope_theta(const hf::ConfigJson& j, double fallback) {
  const json& raw = j.json();
  STRATA_CHECK(!j.has("rope_scaling"), j.where(), ": rope_scaling ", raw["rope_scaling"].dump(),
               " is not supported (strata's Llama applies plain rotary embeddings; it must be null)");
  double theta = j.number_or("rope_theta", fallback);
  if (!j.has("rope_parameters")) return theta;
  const json& rope = raw["rope_parameters"];
  STRATA_CHECK(rope.is_object(), j.where(), ": rope_parameters must be an object, found ", rope.dump());
  for (const auto& [key, value] : rope.items()) {
    if (key == "rope_type") {
      STRATA_CHECK(value == "default", j.where(), ": rope_parameters.rope_type ", value.dump(),
                   " is not supported (strata's Llama applies plain rotary embeddings: \"default\")");
    } else if (key == "rope_theta") {
      STRATA_CHECK(value.is_number(), j.where(), ": rope_parameters.rope_theta must be a number, found ", value.dump());
      STRATA_CHECK(!j.has("rope_theta") || value.get<double>() == theta, j.where(), ": rope_parameters.rope_theta ",
                   value.dump(), " differs from rope_theta ", theta);
      theta = value.get<double>();
    } else {
      STRATA_FAIL(j.where(), ": rope_parameters.", key, " (", value.dump(),
                  ") is not supported (strata's Llama applies plain rotary embeddings)");
    }
  }
  return theta;
}

}  // namespace

namespace hf {

LlamaConfigRead read_llama_config(const ConfigJson& j) {
  const json& raw = j.json();
  // Architecture choices strata's Llama cannot compute: refuse rather than compute something else.
  STRATA_CHECK(!j.has("hidden_act") || raw["hidden_act"] == "silu", j.where(), ": hidden_act ",
               raw.value("hidden_act", json()).dump(), " is not supported (strata's Llama uses silu, SwiGLU)");
  for (const char* bias : {"attention_bias", "mlp_bias"}) {
    STRATA_CHECK(!j.boolean_or(bias, false), j.where(), ": ", bias,
                 " true is not supported (strata's Llama has no biases)");
  }
  LlamaConfigRead r;
  HfLlamaConfig& c = r.config;
  c.vocab_size = j.integer("vocab_size");
  c.n_embd = j.integer("hidden_size");
  c.intermediate_size = j.integer("intermediate_size");
  c.n_layer = j.integer("num_hidden_layers");
  c.n_head = j.integer("num_attention_heads");
  c.n_kv_head = j.integer_or("num_key_value_heads", c.n_head);  // HF: absent means one kv head per head
  c.context = j.integer_or("max_position_embeddings", c.context);
  c.rms_norm_eps = j.number_or("rms_norm_eps", c.rms_norm_eps);
  c.init_std = j.number_or("initializer_range", c.init_std);
  c.rope_theta = read_rope_theta(j, c.rope_theta);
  r.tied = j.boolean_or("tie_word_embeddings", false);
  // transformers moves a top-level partial_rotary_factor into rope_parameters; strata rotates every dimension.
  STRATA_CHECK(!j.has("partial_rotary_factor") || j.number_or("partial_rotary_factor", 1.0) == 1.0, j.where(),
               ": partial_rotary_factor ", raw.value("partial_rotary_factor", json()).dump(),
               " is not supported (strata's Llama rotates every dimension of a head: it must be 1)");
  check_llama_fields(c, j.where());
  if (j.has("head_dim")) {
    STRATA_CHECK(j.integer("head_dim") == c.n_embd / c.n_head, j.where(), ": head_dim ", raw["head_dim"].dump(),
                 " is not hidden_size / num_attention_heads = ", c.n_embd / c.n_head, " (as strata's Llama needs)");
  }
  return r;
}

}  // namespace hf

namespace {

// Sizes in config.json against the file, naming the field, before any per-layer list is built.
// `mlp_up` is a first-layer tensor of shape [intermediate_size, hidden_size].
void check_sizes_against_file(const StateDict& tensors, const HfLlamaConfig& c, const std::string& mlp_up,
                              const std::string& where) {
  const int64_t D = c.n_embd / c.n_head;
  const std::string hidden = "hidden_size " + std::to_string(c.n_embd);
  hf::check_layer_count(tensors, "model.layers.", "num_hidden_layers", c.n_layer, where);
  hf::check_shape_from_fields(tensors, "model.embed_tokens.weight", {c.vocab_size, c.n_embd},
                              "vocab_size " + std::to_string(c.vocab_size) + " and " + hidden, where);
  hf::check_shape_from_fields(tensors, mlp_up, {c.intermediate_size, c.n_embd},
                              "intermediate_size " + std::to_string(c.intermediate_size) + " and " + hidden, where);
  hf::check_shape_from_fields(
      tensors, "model.layers.0.self_attn.k_proj.weight", {c.n_kv_head * D, c.n_embd},
      "num_key_value_heads " + std::to_string(c.n_kv_head) + ", head_dim " + std::to_string(D) + " and " + hidden,
      where);
}

}  // namespace

void export_llama_safetensors(const std::string& dir, const StateDict& model_state, const HfLlamaConfig& config) {
  const std::string where = "export_llama_safetensors '" + dir + "'";
  hf::check_llama_fields(config, where);
  const int64_t rows = hf::vocab_rows(config.vocab_size, config.padded_vocab_size, where);
  const StateDict real = hf::without_vocab_padding(model_state, hf::llama_vocab_tensors(), config.vocab_size, rows);
  hf::write_model_dir(
      dir, hf::tensors_for_export(real, hf::llama_layout(config, llama_mlp(config)), {}, where, what_params(config)),
      hf::llama_config_json(config, "llama", "LlamaForCausalLM"), where);
}

namespace hf {

StateDict import_llama_layout(const std::string& dir, const LlamaConfigRead& read, const LlamaLikeLayout& layout) {
  hf::ModelWeights weights = hf::read_model_weights(dir);
  const std::string where = layout.function + " '" + weights.source + "'";
  StateDict tensors;
  for (auto& [name, t] : weights.tensors) {
    if (!is_rotary_buffer(name)) tensors.emplace(name, t);
  }
  // Tied, save_pretrained leaves the head out of the file; transformers 5 then ties it to the
  // embedding, or the embedding to a head that is there alone. A head and an embedding that
  // are both there are used as they are, as transformers 5 does.
  const bool has_head = tensors.contains("lm_head.weight");
  const bool has_embedding = tensors.contains("model.embed_tokens.weight");
  const bool head_from_embedding = read.tied && !has_head && has_embedding;
  const bool embedding_from_head = read.tied && has_head && !has_embedding;
  if (head_from_embedding) tensors.emplace("lm_head.weight", tensors.at("model.embed_tokens.weight"));
  if (embedding_from_head) tensors.emplace("model.embed_tokens.weight", tensors.at("lm_head.weight"));
  check_sizes_against_file(tensors, read.config, "model.layers.0." + layout.mlp_up, where);
  StateDict out =
      hf::tensors_from_import(tensors, llama_layout(read.config, layout.mlp), where,
                              layout.family + " parameter for n_layer=" + std::to_string(read.config.n_layer));
  // Its own storage: strata's head is untied and trains apart from the embedding.
  if (head_from_embedding) out["lm_head.weight"] = out.at("lm_head.weight").clone();
  if (embedding_from_head) out["embed_tokens.weight"] = out.at("embed_tokens.weight").clone();
  return out;
}

}  // namespace hf

StateDict import_llama_safetensors(const std::string& dir, HfLlamaConfig* config_out, int64_t padded_vocab_size) {
  const hf::ConfigJson j(hf::file_in(dir, "config.json"), "LLaMA");
  j.expect_model_type("llama");
  const hf::LlamaConfigRead read = hf::read_llama_config(j);
  StateDict out = hf::import_llama_layout(dir, read,
                                          {.mlp = llama_mlp(read.config),
                                           .mlp_up = "mlp.up_proj.weight",
                                           .function = "import_llama_safetensors",
                                           .family = "LLaMA"});
  hf::pad_vocab_rows(
      out, hf::llama_vocab_tensors(),
      hf::vocab_rows(read.config.vocab_size, padded_vocab_size, "import_llama_safetensors '" + dir + "'"));
  if (config_out) {
    *config_out = read.config;
    config_out->padded_vocab_size = padded_vocab_size;
  }
  return out;
}

}  // namespace strata::checkpoint
