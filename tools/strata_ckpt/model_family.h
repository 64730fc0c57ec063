#pragma once
// Which model family strata-ckpt handles: the one --format names, else the one the checkpoint
// records (config.family) or, on import, config.json's model_type. The families themselves
// (configs, Hugging Face layouts) are the library's registry (strata/train/model_registry.h).
#include <string>

#include "strata/checkpoint/checkpoint.h"
#include "strata/train/model_registry.h"

namespace strata::ckpt_tool {

// `requested` ("" when the user gave no --format) wins when given; otherwise config.family
// decides, and a checkpoint without it is refused naming the field and --format. `where`
// names the checkpoint in errors.
const train::ModelFamily& family_of(const checkpoint::Metadata& metadata, const std::string& requested,
                                    const std::string& where);
// The family whose Hugging Face model_type is `model_type`, or an error naming `where`.
const train::ModelFamily& family_of_hf_type(const std::string& model_type, const std::string& where);

}  // namespace strata::ckpt_tool
