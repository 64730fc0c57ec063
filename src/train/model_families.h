#pragma once
// The families model_registry.cpp registers at start-up, one file each.
#include <string>

#include "strata/checkpoint/hf_llama.h"
#include "strata/nn/llama.h"
#include "strata/train/model_registry.h"

namespace strata::train::detail {

ModelFamily gpt2_family();
ModelFamily llama_family();
ModelFamily mixtral_family();
// Refuses config entries whose config.family names another family than `family` (entries
// without config.family, from a caller's own config, pass).
void check_family_entry(const checkpoint::Metadata& metadata, const std::string& family, const std::string& where);

// LLaMA's configuration in transformers' terms and back (Mixtral's extends it); imported
// weights are float32, and so is the configuration from_hf gives.
checkpoint::HfLlamaConfig llama_to_hf(const nn::LlamaConfig& c);
nn::LlamaConfig llama_from_hf(const checkpoint::HfLlamaConfig& c);

}  // namespace strata::train::detail
