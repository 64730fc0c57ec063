#include "train_llama/corpus.h"

#include <algorithm>
#include <filesystem>

#include "common/preflight.h"
#include "strata/core/error.h"
#include "strata/data/byte_text.h"

namespace strata::examples {

int64_t build_byte_tokens(const std::string& text_path, const std::string& tokens_path) {
  namespace fs = std::filesystem;
  STRATA_CHECK(fs::exists(text_path), "--text '", text_path,
               "' does not exist; pass a UTF-8 text file or a directory "
               "of them, or --data with a token file");
  std::vector<fs::path> files;
  if (fs::is_directory(text_path)) {
    for (const auto& entry : fs::directory_iterator(text_path))
      if (entry.is_regular_file() && !entry.is_symlink()) files.push_back(entry.path());
    std::sort(files.begin(), files.end());
  } else {
    // A device or FIFO (/dev/zero) would be read without end.
    STRATA_CHECK(fs::is_regular_file(text_path), "--text '", text_path,
                 "' is not a regular file or a directory (a device, FIFO or socket): pass a text file");
    files.emplace_back(text_path);
  }
  // The text, its int64 tokens and the file's uint16 ones are all in memory at once.
  uintmax_t bytes = 0;
  for (const fs::path& file : files) {
    STRATA_CHECK(!same_file(file, tokens_path), "--tokens-out '", tokens_path, "' is the --text file '", file.string(),
                 "': its tokens would replace the text; pass another --tokens-out");
    bytes += fs::file_size(file);
  }
  const double needed = 12.0 * static_cast<double>(bytes), available = available_memory_bytes();
  STRATA_CHECK(available <= 0 || needed <= available, "--text '", text_path, "' holds ", bytes,
               " bytes: building its tokens in memory needs about ", static_cast<uintmax_t>(needed),
               " bytes, more than the ", static_cast<uintmax_t>(available),
               " available; convert it with "
               "text_to_tokens (which streams) and pass --data");
  std::string text;
  for (const fs::path& file : files) {
    const std::string part = data::read_text_file(file.string());
    const int64_t bad = data::first_invalid_utf8(part);
    STRATA_CHECK(bad < 0, "--text: '", file.string(), "' is not UTF-8 text: invalid byte sequence at offset ", bad);
    text += part;
    if (!text.empty() && text.back() != '\n') text += '\n';
    text += '\n';
  }
  STRATA_CHECK(!text.empty(), "--text '", text_path, "' holds no text");
  return data::write_byte_token_file(tokens_path, text, 0, text.size());
}

TextCorpus::TextCorpus(const std::string& train_path, const std::string& val_path, double val_fraction)
    : train_file_(data::TokenFile::open(train_path)) {
  if (val_path.empty()) {
    const int64_t n = train_file_.token_count();
    train_end_ = n - static_cast<int64_t>(static_cast<double>(n) * val_fraction);
    val_begin_ = train_end_;
    val_end_ = n;
  } else {
    val_file_ = data::TokenFile::open(val_path);
    train_end_ = train_file_.token_count();
    val_end_ = val_file_->token_count();
  }
}

int64_t TextCorpus::vocab_size() const {
  return val_file_ ? std::max(train_file_.vocab_size(), val_file_->vocab_size()) : train_file_.vocab_size();
}

data::Batch TextCorpus::train_batch(std::span<const int64_t> starts, int64_t context) const {
  for (int64_t s : starts)
    STRATA_CHECK(s >= 0 && s < train_windows(context), "training window ", s, " is outside the training part");
  return train_file_.batch(starts, context);
}

data::Batch TextCorpus::val_batch(std::span<const int64_t> windows, int64_t context) const {
  std::vector<int64_t> offsets;
  offsets.reserve(windows.size());
  for (int64_t w : windows) {
    STRATA_CHECK(w >= 0 && w < val_windows(context), "validation window ", w, " is outside the validation part");
    offsets.push_back(val_begin_ + w * context);
  }
  return val_file().batch(offsets, context);
}

std::vector<int64_t> TextCorpus::val_text(int64_t offset, int64_t count) const {
  const int64_t begin = std::min(val_begin_ + offset, val_end_);
  return val_file().tokens(begin, std::min(count, val_end_ - begin));
}

}  // namespace strata::examples
