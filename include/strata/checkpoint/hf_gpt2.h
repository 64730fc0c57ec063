#pragma once
// Export to and import from the Hugging Face GPT-2 layout (a directory with
// model.safetensors and config.json that transformers' GPT2LMHeadModel.from_pretrained
// reads). strata's GPT names its parameters like HF GPT-2 without the "transformer."
// prefix, but its Linear weights are [out, in] while HF's Conv1D weights are [in, out]:
// the four projection weights of each block are transposed on the way.
#include <cstdint>
#include <string>

#include "strata/tensor/state_dict.h"

namespace strata::checkpoint {

// The shape of a GPT-2 model (the nn layer will include or convert to this).
struct Gpt2Config {
  int64_t vocab_size = 50257;
  int64_t n_positions = 1024;  // context length
  int64_t n_embd = 768;
  int64_t n_layer = 12;
  int64_t n_head = 12;
  double dropout = 0.1;  // resid, embd and attn dropout alike
  // strata's rows of the vocabulary tensors (a padded vocabulary; 0: vocab_size). Not in
  // config.json: export writes the first vocab_size rows, import appends zero rows.
  int64_t padded_vocab_size = 0;
};

// Writes dir/model.safetensors (float32, HF names and layouts) and dir/config.json; creates
// `dir` if needed. `model_state` must hold exactly the GPT-2 parameters for `config` with
// strata's shapes (an extra "lm_head.weight", tied to wte, is skipped); errors name a
// missing, unexpected or misshapen tensor. With config.padded_vocab_size, wte holds that many
// rows and only its first vocab_size are written.
void export_gpt2_safetensors(const std::string& dir, const StateDict& model_state, const Gpt2Config& config);

// Reads dir/config.json and dir/model.safetensors (or the sharded model.safetensors.index.json
// and its shards) back into strata's names and layouts (float32). Accepts names with a
// "transformer." prefix and ignores the attention-mask buffers "h.{i}.attn.bias"/"masked_bias"
// older HF files carry. The head must be wte, as transformers 5 resolves it from
// tie_word_embeddings and the file's lm_head.weight (docs/checkpoint-format.md); config fields
// strata's GPT cannot compute (attention scaling, activation, epsilon, n_inner, cross-attention)
// and sizes the file does not hold are refused by name. Errors name a missing, unexpected or
// misshapen tensor. `config_out` may be null. padded_vocab_size (0: none; else >= the file's
// vocab_size, or an error naming both) pads wte with zero rows to that many, and is reported
// in config_out.
StateDict import_gpt2_safetensors(const std::string& dir, Gpt2Config* config_out = nullptr,
                                  int64_t padded_vocab_size = 0);

}  // namespace strata::checkpoint
