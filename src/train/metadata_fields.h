#pragma once
// Reading and writing single config.* fields (training_state.cpp and the model families).
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

}  // namespace strata::train::detail
