#pragma once
// The text train_llama learns from: token files (byte-level ones built from a UTF-8 text, or
// any strata/llm.c token file) split into a training part and a held-out validation part.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "strata/data/token_file.h"

namespace strata::examples {

// Writes the byte-level token file (strata/data/byte_text.h) of a UTF-8 text file, or of a
// directory's regular files (sorted by name, each ending in a blank line; links are skipped,
// so an alias is not read twice). Returns the number of tokens.
int64_t build_byte_tokens(const std::string& text_path, const std::string& tokens_path);

class TextCorpus {
 public:
  // `val_path` empty: the last `val_fraction` of `train_path`'s tokens are held out.
  TextCorpus(const std::string& train_path, const std::string& val_path, double val_fraction);

  int64_t vocab_size() const;
  int64_t train_tokens() const { return train_end_; }
  int64_t val_tokens() const { return val_end_ - val_begin_; }

  // Training windows may start at any token of the training part: start s covers inputs
  // [s, s + context) and targets one token later, all inside the part.
  int64_t train_windows(int64_t context) const { return std::max<int64_t>(train_tokens() - context, 0); }
  data::Batch train_batch(std::span<const int64_t> starts, int64_t context) const;
  // Validation windows do not overlap: window w starts at w * context of the validation part.
  int64_t val_windows(int64_t context) const { return std::max<int64_t>((val_tokens() - 1) / context, 0); }
  data::Batch val_batch(std::span<const int64_t> windows, int64_t context) const;
  // `count` tokens of the validation part from `offset` (clipped to its end).
  std::vector<int64_t> val_text(int64_t offset, int64_t count) const;

 private:
  const data::TokenFile& val_file() const { return val_file_ ? *val_file_ : train_file_; }

  data::TokenFile train_file_;
  std::optional<data::TokenFile> val_file_;
  int64_t train_end_ = 0;
  int64_t val_begin_ = 0, val_end_ = 0;  // in val_file()
};

}  // namespace strata::examples
