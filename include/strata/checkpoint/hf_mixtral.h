#pragma once
// Export to and import from the Hugging Face MixtralForCausalLM layout (model.safetensors and
// config.json, as transformers' save_pretrained writes them: each expert's w1/w2/w3 apart,
// which transformers 5 fuses on load and splits again on save). strata's Mixtral names its
// parameters like the file without the "model." prefix, with the same [out, in] layouts.
#include <cstdint>
#include <string>

#include "strata/checkpoint/hf_llama.h"
#include "strata/tensor/state_dict.h"

namespace strata::checkpoint {

struct HfMixtralConfig {
  HfLlamaConfig llama;                // the LLaMA fields; intermediate_size is each expert's
  int64_t num_experts = 8;            // num_local_experts
  int64_t top_k = 2;                  // num_experts_per_tok
  double router_aux_loss_coef = 0.0;  // router_aux_loss_coef (transformers' normalisation)
  bool output_router_logits = false;  // output_router_logits: transformers adds the aux loss only then
};

// As export_llama_safetensors, for a Mixtral state dict.
void export_mixtral_safetensors(const std::string& dir, const StateDict& model_state, const HfMixtralConfig& config);

// As import_llama_safetensors, for model_type "mixtral". Refuses, naming the field, a
// sliding_window shorter than max_position_embeddings (strata attends to every earlier
// position) and num_experts_per_tok outside [1, num_local_experts]. router_jitter_noise
// (training-time input noise) is ignored.
// padded_vocab_size as import_llama_safetensors's.
StateDict import_mixtral_safetensors(const std::string& dir, HfMixtralConfig* config_out = nullptr,
                                     int64_t padded_vocab_size = 0);

}  // namespace strata::checkpoint
