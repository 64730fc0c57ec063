#pragma once
// A padded vocabulary (config.padded_vocab_size) in the Hugging Face layout (internal): the
// files hold vocab_size rows, strata's token embedding and head may hold more, whose padding
// rows are zero. Export strips them, import appends them.
#include <cstdint>
#include <string>
#include <vector>

#include "strata/tensor/state_dict.h"

namespace strata::checkpoint::hf {

// The rows strata's vocabulary tensors hold: padded_vocab_size, or vocab_size when it is 0.
// Fails naming `where` and both sizes when padded_vocab_size is below vocab_size.
int64_t vocab_rows(int64_t vocab_size, int64_t padded_vocab_size, const std::string& where);

// `state` with each tensor of `names` that holds `rows` rows cut to its first vocab_size
// (views, no copy); other tensors as they are (the export's shape check names a wrong one).
StateDict without_vocab_padding(const StateDict& state, const std::vector<std::string>& names, int64_t vocab_size,
                                int64_t rows);

// Appends zero rows to each tensor of `names` in `state` (vocab_size rows each) up to `rows`.
void pad_vocab_rows(StateDict& state, const std::vector<std::string>& names, int64_t rows);

}  // namespace strata::checkpoint::hf
