#include "strata/checkpoint/hf_gpt2.h"

#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "checkpoint/hf_layout.h"
#include "checkpoint/hf_vocab_padding.h"
#include "checkpoint/hf_weights.h"

namespace strata::checkpoint {
namespace {

using nlohmann::json;

std::vector<hf::TensorSpec> gpt2_params(const Gpt2Config& c) {
  const int64_t C = c.n_embd;
  std::vector<hf::TensorSpec> p;
  // GPT-2's file names are strata's; four weights are stored transposed.
  auto add = [&p](const std::string& name, Shape shape, bool conv1d = false) {
    p.push_back({name, name, std::move(shape), conv1d});
  };
  add("wte.weight", {c.vocab_size, C});
  add("wpe.weight", {c.n_positions, C});
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string h = "h." + std::to_string(i) + ".";
    add(h + "ln_1.weight", {C});
    add(h + "ln_1.bias", {C});
    add(h + "attn.c_attn.weight", {3 * C, C}, true);
    add(h + "attn.c_attn.bias", {3 * C});
    add(h + "attn.c_proj.weight", {C, C}, true);
    add(h + "attn.c_proj.bias", {C});
    add(h + "ln_2.weight", {C});
    add(h + "ln_2.bias", {C});
    add(h + "mlp.c_fc.weight", {4 * C, C}, true);
    add(h + "mlp.c_fc.bias", {4 * C});
    add(h + "mlp.c_proj.weight", {C, 4 * C}, true);
    add(h + "mlp.c_proj.bias", {C});
  }
  add("ln_f.weight", {C});
  add("ln_f.bias", {C});
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
  json j = hf::common_config("gpt2", "GPT2LMHeadModel", c.vocab_size, /*tie_word_embeddings=*/true, 0.02);
  j.update({
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
      {"scale_attn_weights", true},
      {"scale_attn_by_inverse_layer_idx", false},
      {"reorder_and_upcast_attn", false},
  });
  // GPT-2's tokenizer puts <|endoftext|> at 50256; other vocabularies keep HF's defaults.
  if (c.vocab_size > 50256) {
    j["bos_token_id"] = 50256;
    j["eos_token_id"] = 50256;
  }
  return j;
}

struct ReadConfig {
  Gpt2Config config;
  bool tied = true;                             // tie_word_embeddings
  const char* positions_field = "n_positions";  // or "n_ctx", in older files
  std::string where;                            // "GPT-2 config '<path>'"
};

ReadConfig read_config(const std::string& path) {
  const hf::ConfigJson j(path, "GPT-2");
  const json& raw = j.json();
  j.expect_model_type("gpt2");
  // Architecture choices Gpt2Config cannot express: refuse rather than compute something else.
  if (j.has("activation_function")) {
    const json& act = raw["activation_function"];
    STRATA_CHECK(act == "gelu_new" || act == "gelu_pytorch_tanh", j.where(), ": activation_function ", act.dump(),
                 " is not the tanh GELU strata's GPT uses");
  }
  if (j.has("n_inner")) {
    STRATA_CHECK(raw["n_inner"] == 4 * j.integer("n_embd"), j.where(), ": n_inner ", raw["n_inner"].dump(),
                 " is not 4 * n_embd");
  }
  if (j.has("layer_norm_epsilon")) {
    STRATA_CHECK(j.number_or("layer_norm_epsilon", 0.0) == 1e-5, j.where(), ": layer_norm_epsilon ",
                 raw["layer_norm_epsilon"].dump(), " differs from the 1e-5 strata's GPT uses");
  }
  // strata's attention always scales its scores by 1/sqrt(head_dim), in every layer.
  STRATA_CHECK(j.boolean_or("scale_attn_weights", true), j.where(),
               ": scale_attn_weights false is not supported (strata's GPT scales attention scores by "
               "1/sqrt(head_dim))");
  STRATA_CHECK(!j.boolean_or("scale_attn_by_inverse_layer_idx", false), j.where(),
               ": scale_attn_by_inverse_layer_idx true is not supported (strata's GPT scales attention scores by "
               "1/sqrt(head_dim) alone, not also by 1/(layer index + 1))");
  STRATA_CHECK(!j.boolean_or("add_cross_attention", false), j.where(),
               ": add_cross_attention true is not supported (strata's GPT is a decoder without cross-attention)");
  // reorder_and_upcast_attn only changes the order and precision of computing the float32
  // scores (transformers' eager path), not the model: accepted.
  j.boolean_or("reorder_and_upcast_attn", false);  // still a boolean when present
  ReadConfig r;
  r.where = j.where();
  r.tied = j.boolean_or("tie_word_embeddings", true);
  Gpt2Config& c = r.config;
  c.vocab_size = j.integer("vocab_size");
  if (!j.has("n_positions")) r.positions_field = "n_ctx";
  c.n_positions = j.integer(r.positions_field);
  c.n_embd = j.integer("n_embd");
  c.n_layer = j.integer("n_layer");
  c.n_head = j.integer("n_head");
  c.dropout = j.number_or("resid_pdrop", c.dropout);
  check_config(c, j.where());
  return r;
}

// Bytes equal after conversion to float32 (transformers ties only equal tensors: torch.equal).
bool same_values(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  const Tensor fa = a.to(DType::Float32).contiguous(), fb = b.to(DType::Float32).contiguous();
  return std::memcmp(fa.raw_data(), fb.raw_data(), fa.numel() * sizeof(float)) == 0;
}

// strata's GPT computes its logits with wte. The head transformers 5 uses: with
// tie_word_embeddings, wte, unless the file holds an lm_head.weight that differs (then that one,
// untied; a file with only the head ties wte to it); without, the file's lm_head.weight. Leaves
// wte in `tensors` when that head is wte, and refuses the file otherwise.
void resolve_head(StateDict& tensors, const ReadConfig& r, const std::string& source) {
  auto head = tensors.find("lm_head.weight");
  if (head == tensors.end()) {
    STRATA_CHECK(r.tied, r.where, ": tie_word_embeddings is false but the file has no 'lm_head.weight' ('", source,
                 "'; transformers would start a random head)");
    return;
  }
  const Tensor lm_head = head->second;
  tensors.erase(head);
  auto wte = tensors.find("wte.weight");
  if (wte == tensors.end()) {
    if (r.tied) tensors.emplace("wte.weight", lm_head);  // transformers ties the missing side to the present one
    return;  // untied without wte: tensors_from_import names the missing tensor
  }
  if (same_values(lm_head, wte->second)) return;
  STRATA_FAIL(r.where,
              r.tied ? ": tie_word_embeddings is true, but 'lm_head.weight' differs from 'wte.weight' in '"
                     : ": tie_word_embeddings is false and 'lm_head.weight' differs from 'wte.weight' in '",
              source, r.tied ? "' (transformers 5 then uses it as a separate head)" : "'",
              ": strata's GPT ties its output head to the token embedding (wte), so it cannot represent this model");
}

// Sizes in config.json against the file, naming the field, before any per-layer list is built.
void check_sizes_against_file(const StateDict& tensors, const ReadConfig& r, const std::string& where) {
  const Gpt2Config& c = r.config;
  const std::string embd = " and n_embd " + std::to_string(c.n_embd);
  hf::check_layer_count(tensors, "h.", "n_layer", c.n_layer, where);
  hf::check_shape_from_fields(tensors, "wte.weight", {c.vocab_size, c.n_embd},
                              "vocab_size " + std::to_string(c.vocab_size) + embd, where);
  hf::check_shape_from_fields(tensors, "wpe.weight", {c.n_positions, c.n_embd},
                              std::string(r.positions_field) + " " + std::to_string(c.n_positions) + embd, where);
}

}  // namespace

void export_gpt2_safetensors(const std::string& dir, const StateDict& model_state, const Gpt2Config& config) {
  const std::string where = "export_gpt2_safetensors '" + dir + "'";
  check_config(config, where);
  const int64_t rows = hf::vocab_rows(config.vocab_size, config.padded_vocab_size, where);
  const StateDict out = hf::tensors_for_export(
      hf::without_vocab_padding(model_state, {"wte.weight"}, config.vocab_size, rows), gpt2_params(config),
      [](const std::string& name) { return name == "lm_head.weight"; }, where,
      "GPT-2 parameter for n_layer=" + std::to_string(config.n_layer));
  hf::write_model_dir(dir, out, config_json(config), where);
}

StateDict import_gpt2_safetensors(const std::string& dir, Gpt2Config* config_out, int64_t padded_vocab_size) {
  const ReadConfig read = read_config(hf::file_in(dir, "config.json"));
  hf::ModelWeights weights = hf::read_model_weights(dir);
  const std::string where = "import_gpt2_safetensors '" + weights.source + "'";
  StateDict by_name;  // prefix stripped
  for (auto& [name, t] : weights.tensors) {
    const std::string key = name.rfind("transformer.", 0) == 0 ? name.substr(12) : name;
    if (is_attention_buffer(key)) continue;  // not a parameter
    STRATA_CHECK(!by_name.contains(key), where, ": tensor '", key, "' appears both with and without \"transformer.\"");
    by_name.emplace(key, t);
  }
  resolve_head(by_name, read, weights.source);
  check_sizes_against_file(by_name, read, where);

  StateDict out = hf::tensors_from_import(by_name, gpt2_params(read.config), where,
                                          "GPT-2 parameter for n_layer=" + std::to_string(read.config.n_layer));
  hf::pad_vocab_rows(out, {"wte.weight"}, hf::vocab_rows(read.config.vocab_size, padded_vocab_size, where));
  if (config_out) {
    *config_out = read.config;
    config_out->padded_vocab_size = padded_vocab_size;
  }
  return out;
}

}  // namespace strata::checkpoint
