#pragma once
// Strict integer options for strata-ckpt. CLI11 converts "99999999999999999999" to INT64_MAX
// and "-5" to a huge unsigned value without a word; a step or seed the user never typed would
// then be recorded in the checkpoint. This check runs on the text before any conversion.
#include <CLI/CLI.hpp>
#include <cstdint>

namespace strata::ckpt_tool {

// Accepts only a plain decimal integer in [0, max] (digits alone: no sign, space, exponent or
// base prefix); otherwise CLI11 reports "<option>: <text> is not an integer in [0, <max>]".
CLI::Validator integer_at_most(uint64_t max);

}  // namespace strata::ckpt_tool
