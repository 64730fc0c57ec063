#pragma once
// Token files: a corpus tokenised ahead of time, read through a read-only memory map, so a
// multi-gigabyte file costs no load time and the ranks on one node share its pages.
//
// Format version 1 (docs/data-format.md); every integer is little-endian:
//   offset size  field
//        0    8  magic, the ASCII bytes "STRTOK01"
//        8    4  u32 version = 1
//       12    4  u32 token_bytes: 2 (uint16 tokens) or 4 (uint32 tokens)
//       16    8  u64 token_count
//       24    8  u64 vocab_size: every token is < vocab_size (1 <= vocab_size <= 2^(8*token_bytes))
//       32   32  reserved, all zero
//       64       token_count tokens of token_bytes bytes each; the file ends right after them
//
// Every check names the file and the field: open() rejects a missing or short file, a wrong
// magic, an unknown version or token_bytes, a non-zero reserved byte and a size that does not
// match token_count; validate() scans for tokens >= vocab_size (batch() checks the tokens it
// copies). The file must not be truncated while open (a memory map then faults).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "strata/data/dataset.h"

namespace strata::data {

inline constexpr char kTokenFileMagic[8] = {'S', 'T', 'R', 'T', 'O', 'K', '0', '1'};
inline constexpr uint32_t kTokenFileVersion = 1;
inline constexpr int64_t kTokenFileHeaderBytes = 64;

class TokenFile {
 public:
  static TokenFile open(const std::string& path);

  TokenFile(TokenFile&& other) noexcept;
  TokenFile& operator=(TokenFile&& other) noexcept;
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;
  ~TokenFile();

  const std::string& path() const { return path_; }
  int64_t token_count() const { return token_count_; }
  int64_t vocab_size() const { return vocab_size_; }
  int token_bytes() const { return token_bytes_; }

  int64_t token(int64_t i) const;
  std::vector<int64_t> tokens(int64_t offset, int64_t count) const;
  // Scans every token; throws at the first one >= vocab_size, naming its position.
  void validate() const;

  // Row b: inputs = tokens[o, o+seq_len), targets = tokens[o+1, o+seq_len+1) with o = offsets[b];
  // int64 [B, seq_len]. Throws when a window runs past the end of the file.
  Batch batch(std::span<const int64_t> offsets, int64_t seq_len) const;
  // Non-overlapping windows: window w starts at token w*seq_len. num_windows is the number
  // that fit (each needs seq_len+1 tokens); use it as a BatchSampler's dataset_size.
  int64_t num_windows(int64_t seq_len) const;
  Batch window_batch(std::span<const int64_t> windows, int64_t seq_len) const;

 private:
  TokenFile() = default;
  void release() noexcept;

  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const unsigned char* data_ = nullptr;  // the first token
  int64_t token_count_ = 0;
  int64_t vocab_size_ = 0;
  int token_bytes_ = 0;
};

// Writes `tokens` in the format above, atomically: a temporary file in the same directory,
// fsynced, then renamed over `path`, so a reader never sees a partial file. Throws (leaving
// `path` as it was) when token_bytes is not 2 or 4, vocab_size does not fit token_bytes, or
// a token is outside [0, vocab_size).
void write_token_file(const std::string& path, std::span<const int64_t> tokens, int token_bytes, int64_t vocab_size);

}  // namespace strata::data
