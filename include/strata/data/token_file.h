#pragma once
// Token files: a corpus tokenised ahead of time, read through a read-only memory map, so a
// multi-gigabyte file costs no load time and the ranks on one node share its pages.
//
// TokenFile::open reads three formats, told apart by their first bytes (docs/data-format.md):
//  - strata's own (write_token_file), version 1; every integer is little-endian:
//      offset size  field
//           0    8  magic, the ASCII bytes "STRTOK01"
//           8    4  u32 version = 1
//          12    4  u32 token_bytes: 2 (uint16 tokens) or 4 (uint32 tokens)
//          16    8  u64 token_count
//          24    8  u64 vocab_size: every token is < vocab_size (1 <= vocab_size <= 2^(8*token_bytes))
//          32   32  reserved, all zero
//          64       token_count tokens of token_bytes bytes each; the file ends right after them
//  - llm.c's token shards: 256 int32 (header[0] magic 20240520 with header[1] version 1 and
//    uint16 tokens, or magic 20240801 version 7 and uint32 tokens; header[2] the token count),
//    then the tokens.
//  - nanoGPT's train.bin / val.bin: raw uint16 tokens, no header. It has no magic, so it is
//    taken only for a file named *.bin of even size whose first bytes match no magic above.
// llm.c and raw files record no vocab_size: pass it in TokenFileOptions, or vocab_size()
// scans the file once for the largest token.
//
// Every check names the file and the field: open() rejects a missing, empty or short file, an
// unknown format, version or token_bytes, a non-zero reserved byte and a size that does not
// match the token count; validate() scans for tokens >= vocab_size (batch() checks the tokens it
// copies). The file must not be truncated while open (a memory map then faults).
#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "strata/data/dataset.h"

namespace strata::data {

inline constexpr char kTokenFileMagic[8] = {'S', 'T', 'R', 'T', 'O', 'K', '0', '1'};
inline constexpr uint32_t kTokenFileVersion = 1;
inline constexpr int64_t kTokenFileHeaderBytes = 64;
// llm.c (dev/data/data_common.py): GPT-2 shards, Llama-3 shards, and multiple-choice eval files
// (not token streams; refused by name).
inline constexpr uint32_t kLlmcMagicGpt2 = 20240520;
inline constexpr uint32_t kLlmcMagicLlama3 = 20240801;
inline constexpr uint32_t kLlmcMagicEval = 20240522;
inline constexpr int64_t kLlmcHeaderBytes = 256 * 4;

enum class TokenFormat { Strata, LlmC, RawUint16 };
const char* token_format_name(TokenFormat format);  // "llm.c token shard", ...

struct TokenFileOptions {
  // The tokenizer's vocabulary (e.g. 50257 for GPT-2) for llm.c and raw files, whose bytes do
  // not record it; 0: vocab_size() is the largest token + 1, found by one scan. For a strata
  // file the header's value holds, and this, if given, must not be smaller (it is the model's).
  int64_t vocab_size = 0;
};

class TokenFile {
 public:
  static TokenFile open(const std::string& path, const TokenFileOptions& options = {});

  TokenFile(TokenFile&& other) noexcept;
  TokenFile& operator=(TokenFile&& other) noexcept;
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;
  ~TokenFile();

  const std::string& path() const { return path_; }
  int64_t token_count() const { return token_count_; }
  // Scans the whole file on the first call when neither the file nor the options give it.
  int64_t vocab_size() const;
  int token_bytes() const { return token_bytes_; }
  TokenFormat format() const { return format_; }

  int64_t token(int64_t i) const;
  std::vector<int64_t> tokens(int64_t offset, int64_t count) const;
  // Scans every token; throws at the first one >= vocab_size, naming its position (with no
  // known vocab_size it finds it instead: the largest token + 1).
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
  // Largest token + 1 (1 for a file without tokens).
  int64_t scan_vocab() const;
  // What batch() checks tokens against: vocab_size when known, else the width's limit.
  uint64_t token_limit() const;

  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const unsigned char* data_ = nullptr;  // the first token
  int64_t token_count_ = 0;
  // 0 until known; atomic because vocab_size() may fill it in from several threads (any of
  // them computes the same value).
  mutable std::atomic<int64_t> vocab_size_{0};
  int token_bytes_ = 0;
  TokenFormat format_ = TokenFormat::Strata;
};

// Writes `tokens` in strata's format, atomically: a temporary file in the same directory,
// fsynced, then renamed over `path`, so a reader never sees a partial file. Throws (leaving
// `path` as it was) when token_bytes is not 2 or 4, vocab_size does not fit token_bytes, or
// a token is outside [0, vocab_size).
void write_token_file(const std::string& path, std::span<const int64_t> tokens, int token_bytes, int64_t vocab_size);

}  // namespace strata::data
