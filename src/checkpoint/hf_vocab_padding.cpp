#include "checkpoint/hf_vocab_padding.h"

#include "strata/ops.h"
#include "strata/tensor/factory.h"

namespace strata::checkpoint::hf {

int64_t vocab_rows(int64_t vocab_size, int64_t padded_vocab_size, const std::string& where) {
  STRATA_CHECK(padded_vocab_size == 0 || padded_vocab_size >= vocab_size, where, ": padded_vocab_size ",
               padded_vocab_size, " is smaller than vocab_size ", vocab_size,
               " (0 means no padding; otherwise it must be >= vocab_size)");
  return padded_vocab_size == 0 ? vocab_size : padded_vocab_size;
}

StateDict without_vocab_padding(const StateDict& state, const std::vector<std::string>& names, int64_t vocab_size,
                                int64_t rows) {
  StateDict out = state;
  if (rows == vocab_size) return out;
  for (const std::string& name : names) {
    auto it = out.find(name);
    if (it != out.end() && it->second.dim() >= 1 && it->second.size(0) == rows)
      it->second = it->second.narrow(0, 0, vocab_size);
  }
  return out;
}

void pad_vocab_rows(StateDict& state, const std::vector<std::string>& names, int64_t rows) {
  for (const std::string& name : names) {
    auto it = state.find(name);
    if (it == state.end() || it->second.size(0) == rows) continue;
    const Tensor& real = it->second;
    Shape shape = real.shape();
    shape[0] = rows;
    Tensor padded = zeros(shape, {.dtype = real.dtype()});
    padded.narrow(0, 0, real.size(0)).copy_(real);
    it->second = padded;
  }
}

}  // namespace strata::checkpoint::hf
