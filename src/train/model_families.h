#pragma once
// The families model_registry.cpp registers at start-up, one file each.
#include <string>

#include "strata/train/model_registry.h"

namespace strata::train::detail {

ModelFamily gpt2_family();
ModelFamily llama_family();
ModelFamily mixtral_family();
// Refuses config entries whose config.family names another family than `family` (entries
// without config.family, from a caller's own config, pass).
void check_family_entry(const checkpoint::Metadata& metadata, const std::string& family, const std::string& where);

}  // namespace strata::train::detail
