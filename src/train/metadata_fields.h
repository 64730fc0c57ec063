#pragma once
// Reading and writing single config.* fields (training_state.cpp and the model families).
#include <cstdint>
#include <string>

#include "strata/checkpoint/checkpoint.h"
#include "strata/core/dtype.h"

namespace strata::train::detail {

// A double written so that parsing it back gives the same value (configs are compared as text).
std::string exact_decimal(double value);
// metadata[key] as a finite double; throws naming `where` and the key otherwise.
double metadata_double(const checkpoint::Metadata& metadata, const std::string& key, const std::string& where);
// A dtype by the name dtype_name gives it ("float32", "bfloat16", ...).
DType metadata_dtype(const checkpoint::Metadata& metadata, const std::string& key, const std::string& where);

// config.padded_vocab_size, written only when it pads (so an unpadded config's entries, and
// the checks of older checkpoints against them, are as before). Reading: absent means 0 (no
// padding); a value below config.vocab_size throws naming `where` and both fields.
void add_padded_vocab_size(checkpoint::Metadata& metadata, int64_t vocab_size, int64_t padded_vocab_size);
int64_t metadata_padded_vocab_size(const checkpoint::Metadata& metadata, int64_t vocab_size, const std::string& where);

}  // namespace strata::train::detail
