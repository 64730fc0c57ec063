#pragma once
// The LLaMA layout that the Hugging Face LLaMA and Mixtral files share (internal): every
// tensor but the MLP's, config.json's LLaMA fields, and the import with its tied-head rules.
// hf_llama.cpp defines it; a family with another MLP (hf_mixtral.cpp) names its MLP tensors.
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/hf_layout.h"
#include "strata/checkpoint/hf_llama.h"

namespace strata::checkpoint::hf {

// A tensor name after "layers.<i>." and its shape in strata's layout.
using NamedShape = std::pair<std::string, Shape>;

// The specs of every tensor: embedding, per layer the norms, attention and `mlp`, final norm, head.
std::vector<TensorSpec> llama_layout(const HfLlamaConfig& config, const std::vector<NamedShape>& mlp);
// The tensors whose rows are the vocabulary (padded in strata, not in the file).
inline std::vector<std::string> llama_vocab_tensors() { return {"embed_tokens.weight", "lm_head.weight"}; }
// Positive sizes, whole even heads, n_head divisible by n_kv_head; errors start with `where`.
void check_llama_fields(const HfLlamaConfig& config, const std::string& where);
// config.json's fields for `config` (untied head, silu, no biases, plain rotary).
nlohmann::json llama_config_json(const HfLlamaConfig& config, const char* model_type, const char* architecture);

struct LlamaConfigRead {
  HfLlamaConfig config;
  bool tied = false;  // tie_word_embeddings
};
// The LLaMA fields of a config.json whose model_type the caller checked; refuses what strata's
// Llama cannot compute (activation, biases, rope scaling, head_dim), naming the field.
LlamaConfigRead read_llama_config(const ConfigJson& json);

struct LlamaLikeLayout {
  std::vector<NamedShape> mlp;  // per layer, after "layers.<i>."
  std::string mlp_up;           // one of them, [intermediate_size, hidden_size]: checks those fields
  std::string function;         // "import_llama_safetensors", starts errors
  std::string family;           // "LLaMA", names an unexpected tensor's family
};
// Reads dir's weights into strata's names (see import_llama_safetensors).
StateDict import_llama_layout(const std::string& dir, const LlamaConfigRead& read, const LlamaLikeLayout& layout);

}  // namespace strata::checkpoint::hf
