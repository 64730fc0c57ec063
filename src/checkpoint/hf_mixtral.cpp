#include "strata/checkpoint/hf_mixtral.h"

#include <nlohmann/json.hpp>
#include <vector>

#include "checkpoint/hf_layout.h"
#include "checkpoint/hf_llama_layout.h"
#include "checkpoint/hf_vocab_padding.h"

namespace strata::checkpoint {
namespace {

using nlohmann::json;

// The sparse MoE block's tensors after "layers.<i>.": the router, then w1 (gate), w2 (down)
// and w3 (up) of each expert.
std::vector<hf::NamedShape> moe_tensors(const HfMixtralConfig& c) {
  const int64_t C = c.llama.n_embd, I = c.llama.intermediate_size;
  std::vector<hf::NamedShape> out{{"block_sparse_moe.gate.weight", {c.num_experts, C}}};
  for (int64_t e = 0; e < c.num_experts; ++e) {
    const std::string x = "block_sparse_moe.experts." + std::to_string(e) + ".";
    out.push_back({x + "w1.weight", {I, C}});
    out.push_back({x + "w2.weight", {C, I}});
    out.push_back({x + "w3.weight", {I, C}});
  }
  return out;
}

void check_experts(const HfMixtralConfig& c, const std::string& where) {
  STRATA_CHECK(c.num_experts >= 1 && c.top_k >= 1 && c.top_k <= c.num_experts, where, ": num_experts_per_tok ", c.top_k,
               " must lie in [1, num_local_experts] = [1, ", c.num_experts, "]");
}

}  // namespace

void export_mixtral_safetensors(const std::string& dir, const StateDict& model_state, const HfMixtralConfig& c) {
  const std::string where = "export_mixtral_safetensors '" + dir + "'";
  hf::check_llama_fields(c.llama, where);
  check_experts(c, where);
  json j = hf::llama_config_json(c.llama, "mixtral", "MixtralForCausalLM");
  j.erase("pretraining_tp");
  j.erase("mlp_bias");
  j.update({{"num_local_experts", c.num_experts},
            {"num_experts_per_tok", c.top_k},
            {"router_aux_loss_coef", c.router_aux_loss_coef},
            {"output_router_logits", c.output_router_logits},
            {"router_jitter_noise", 0.0},
            {"sliding_window", nullptr}});
  const std::string what = "Mixtral parameter for n_layer=" + std::to_string(c.llama.n_layer);
  const int64_t rows = hf::vocab_rows(c.llama.vocab_size, c.llama.padded_vocab_size, where);
  const StateDict real = hf::without_vocab_padding(model_state, hf::llama_vocab_tensors(), c.llama.vocab_size, rows);
  hf::write_model_dir(dir, hf::tensors_for_export(real, hf::llama_layout(c.llama, moe_tensors(c)), {}, where, what), j,
                      where);
}

StateDict import_mixtral_safetensors(const std::string& dir, HfMixtralConfig* config_out, int64_t padded_vocab_size) {
  const hf::ConfigJson j(hf::file_in(dir, "config.json"), "Mixtral");
  j.expect_model_type("mixtral");
  const hf::LlamaConfigRead read = hf::read_llama_config(j);
  HfMixtralConfig c;
  c.llama = read.config;
  c.num_experts = j.integer_or("num_local_experts", c.num_experts);
  c.top_k = j.integer_or("num_experts_per_tok", c.top_k);
  c.router_aux_loss_coef = j.number_or("router_aux_loss_coef", c.router_aux_loss_coef);
  c.output_router_logits = j.boolean_or("output_router_logits", false);
  check_experts(c, j.where());
  STRATA_CHECK(!j.has("sliding_window") || j.integer("sliding_window") >= c.llama.context, j.where(),
               ": sliding_window ", j.json()["sliding_window"].dump(), " is shorter than max_position_embeddings ",
               c.llama.context, " (strata's Mixtral attends to every earlier position; it must be null)");
  StateDict out = hf::import_llama_layout(dir, read,
                                          {.mlp = moe_tensors(c),
                                           .mlp_up = "block_sparse_moe.experts.0.w3.weight",
                                           .function = "import_mixtral_safetensors",
                                           .family = "Mixtral"});
  hf::pad_vocab_rows(out, hf::llama_vocab_tensors(), hf::vocab_rows(c.llama.vocab_size, padded_vocab_size, j.where()));
  c.llama.padded_vocab_size = padded_vocab_size;
  if (config_out) *config_out = c;
  return out;
}

}  // namespace strata::checkpoint
