#include "model_family.h"

#include "strata/core/error.h"

namespace strata::ckpt_tool {

const char* family_name(Family family) { return family == Family::Gpt2 ? "gpt2" : "llama"; }

Family parse_family(const std::string& name) {
  if (name == "gpt2") return Family::Gpt2;
  if (name == "llama") return Family::Llama;
  STRATA_FAIL("unknown model format '", name, "': expected gpt2 or llama");
}

Family family_of(const checkpoint::Metadata& metadata, const std::string& requested, const std::string& where) {
  if (!requested.empty()) return parse_family(requested);
  if (metadata.count("config.n_kv_head") != 0) return Family::Llama;
  if (metadata.count("config.dropout") != 0) return Family::Gpt2;
  STRATA_FAIL(where, ": its metadata has no config.n_kv_head (LLaMA) or config.dropout (GPT-2) entry to tell the "
              "model family from: pass --format gpt2 or --format llama");
}

checkpoint::Gpt2Config to_hf(const nn::GPTConfig& c) {
  return {.vocab_size = c.vocab_size, .n_positions = c.context, .n_embd = c.n_embd, .n_layer = c.n_layer,
          .n_head = c.n_head, .dropout = c.dropout};
}

checkpoint::HfLlamaConfig to_hf(const nn::LlamaConfig& c) {
  return {.vocab_size = c.vocab_size, .context = c.context, .n_layer = c.n_layer, .n_head = c.n_head,
          .n_kv_head = c.n_kv_head, .n_embd = c.n_embd, .intermediate_size = c.intermediate_size,
          .rope_theta = c.rope_theta, .rms_norm_eps = c.rms_norm_eps, .init_std = c.init_std};
}

nn::GPTConfig from_hf(const checkpoint::Gpt2Config& c) {
  return {.vocab_size = c.vocab_size, .context = c.n_positions, .n_layer = c.n_layer, .n_head = c.n_head,
          .n_embd = c.n_embd, .dropout = c.dropout};
}

nn::LlamaConfig from_hf(const checkpoint::HfLlamaConfig& c) {
  return {.vocab_size = c.vocab_size, .context = c.context, .n_layer = c.n_layer, .n_head = c.n_head,
          .n_kv_head = c.n_kv_head, .n_embd = c.n_embd, .intermediate_size = c.intermediate_size,
          .rope_theta = c.rope_theta, .rms_norm_eps = c.rms_norm_eps, .init_std = c.init_std};
}

}  // namespace strata::ckpt_tool
