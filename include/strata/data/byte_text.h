#pragma once
// Byte-level tokenisation of UTF-8 text: every byte is one token (vocab_size 256), so no
// tokenizer is needed and any text round-trips exactly. The text_to_tokens CLI and the
// examples that train on text share these.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::data {

inline constexpr int64_t kByteVocabSize = 256;

// Offset of the first byte that breaks UTF-8, or -1: catches a binary or Latin-1 file given
// by mistake (the tokens would still be bytes, but not of the text the user meant).
int64_t first_invalid_utf8(std::string_view text);

// Where the last `fraction` of the bytes starts, moved forward past continuation bytes so
// that no character is split between the two parts.
size_t utf8_split_point(std::string_view text, double fraction);

std::vector<int64_t> byte_tokens(std::string_view text);

// Writes the bytes of text[begin, end) as a strata token file (2-byte tokens, vocab 256),
// atomically; returns the number of tokens.
int64_t write_byte_token_file(const std::string& path, std::string_view text, size_t begin, size_t end);

// Reads a whole file as bytes; throws naming the path when it cannot be read.
std::string read_text_file(const std::string& path);

}  // namespace strata::data
