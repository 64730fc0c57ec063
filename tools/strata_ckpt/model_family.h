#pragma once
// Which model family a checkpoint holds (GPT-2 or LLaMA) and the conversions between the
// configuration strata saves as "config.*" metadata and the Hugging Face exporters' configs.
#include <string>

#include "strata/checkpoint/hf_gpt2.h"
#include "strata/checkpoint/hf_llama.h"
#include "strata/checkpoint/safetensors.h"
#include "strata/nn/gpt.h"
#include "strata/nn/llama.h"

namespace strata::ckpt_tool {

enum class Family { Gpt2, Llama };

// "gpt2" / "llama" and back; parse_family throws naming the value.
const char* family_name(Family family);
Family parse_family(const std::string& name);

// The family a checkpoint's "config.*" entries describe: only LLaMA's have n_kv_head, only
// GPT's dropout. `requested` ("" when the user gave no --format) wins when given; a
// checkpoint whose entries say neither (saved without a config) needs it. `where` names the
// checkpoint in errors.
Family family_of(const checkpoint::Metadata& metadata, const std::string& requested, const std::string& where);

checkpoint::Gpt2Config to_hf(const nn::GPTConfig& config);
checkpoint::HfLlamaConfig to_hf(const nn::LlamaConfig& config);
// Imported weights are float32: so are the configurations (a run may then load them into
// any parameter dtype).
nn::GPTConfig from_hf(const checkpoint::Gpt2Config& config);
nn::LlamaConfig from_hf(const checkpoint::HfLlamaConfig& config);

}  // namespace strata::ckpt_tool
