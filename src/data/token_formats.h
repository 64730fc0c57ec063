#pragma once
// Recognises the token file formats TokenFile reads (docs/data-format.md) from a file's first
// bytes, size and name. Private to src/data: token_file.cpp maps what this finds.
#include <cstdint>
#include <string>

#include "strata/data/token_file.h"

namespace strata::data::detail {

struct TokenLayout {
  TokenFormat format = TokenFormat::Strata;
  int64_t header_bytes = 0;  // where the first token starts
  int token_bytes = 0;
  int64_t token_count = 0;
  int64_t vocab_size = 0;  // 0: the format does not record it
};

// `head` holds the file's first min(file_bytes, kTokenFileHeaderBytes) bytes. Throws
// strata::Error naming the file, what was found and the accepted formats.
TokenLayout detect_token_layout(const std::string& path, const unsigned char* head, uint64_t file_bytes);

// Little-endian integer of `bytes` bytes at p.
uint64_t load_le(const unsigned char* p, int bytes);

}  // namespace strata::data::detail
