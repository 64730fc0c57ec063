#pragma once
// Export to and import from the Hugging Face LlamaForCausalLM layout (a directory with
// model.safetensors and config.json that transformers' LlamaForCausalLM.from_pretrained
// reads). strata's Llama names its parameters like HF's without the "model." prefix
// ("layers.0.self_attn.q_proj.weight"; "lm_head.weight" has no prefix in either) and uses
// the same [out, in] layouts, so the tensors are only renamed.
#include <cstdint>
#include <string>

#include "strata/tensor/state_dict.h"

namespace strata::checkpoint {

// The shape of a LLaMA model. The fields are nn::LlamaConfig's (checkpoint/ does not depend
// on nn/), each commented with the config.json key it becomes; the defaults are HF's.
struct HfLlamaConfig {
  int64_t vocab_size = 32000;
  int64_t context = 2048;             // max_position_embeddings
  int64_t n_layer = 32;               // num_hidden_layers
  int64_t n_head = 32;                // num_attention_heads
  int64_t n_kv_head = 32;             // num_key_value_heads
  int64_t n_embd = 4096;              // hidden_size
  int64_t intermediate_size = 11008;  // intermediate_size
  double rope_theta = 10000.0;        // rope_theta
  double rms_norm_eps = 1e-6;         // rms_norm_eps
  double init_std = 0.02;             // initializer_range
  // strata's rows of the vocabulary tensors (a padded vocabulary; 0: vocab_size). Not in
  // config.json: export writes the first vocab_size rows, import appends zero rows.
  int64_t padded_vocab_size = 0;
};

// Writes dir/model.safetensors (float32, HF names) and dir/config.json (each file
// atomically); creates `dir` if needed. `model_state` must hold exactly the Llama
// parameters for `config` with strata's names and shapes; errors name a missing,
// unexpected or misshapen tensor. The head is written untied (tie_word_embeddings false).
// With config.padded_vocab_size, the embedding and head hold that many rows and only their
// first vocab_size are written.
void export_llama_safetensors(const std::string& dir, const StateDict& model_state, const HfLlamaConfig& config);

// Reads dir/config.json and dir/model.safetensors (or the sharded model.safetensors.index.json
// and its shards) into strata's names (float32; bfloat16 and float16 files are converted); the
// sizes in config.json are checked against the file first, by field name. Accepts what
// transformers' save_pretrained writes:
// without "lm_head.weight" when tie_word_embeddings is true (the head is then a copy of
// the embedding; a head that is in the file is used, as transformers 5 does), with rotary
// "inv_freq" buffers (ignored), and rope_theta either at the top level or in
// rope_parameters. Refuses what strata's Llama cannot compute (rope scaling, a partial rotary
// factor, an activation other than silu, biases, a head_dim other than hidden_size /
// num_attention_heads), naming the field. Errors name a missing, unexpected or misshapen tensor and the file.
// `config_out` may be null. padded_vocab_size (0: none; else >= the file's vocab_size, or an
// error naming both) pads the embedding and head with zero rows to that many, and is reported
// in config_out.
StateDict import_llama_safetensors(const std::string& dir, HfLlamaConfig* config_out = nullptr,
                                   int64_t padded_vocab_size = 0);

}  // namespace strata::checkpoint
