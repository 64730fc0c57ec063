#include "strata/data/byte_text.h"

#include <fstream>
#include <iterator>

#include "strata/core/error.h"
#include "strata/data/token_file.h"

namespace strata::data {

int64_t first_invalid_utf8(std::string_view s) {
  const auto n = static_cast<int64_t>(s.size());
  for (int64_t i = 0; i < n;) {
    const auto c = static_cast<unsigned char>(s[static_cast<size_t>(i)]);
    const int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (len == 0 || i + len > n) return i;
    for (int k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(s[static_cast<size_t>(i + k)]) & 0xc0) != 0x80) return i;
    i += len;
  }
  return -1;
}

size_t utf8_split_point(std::string_view text, double fraction) {
  auto at = text.size() - static_cast<size_t>(static_cast<double>(text.size()) * fraction);
  while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xc0) == 0x80) ++at;
  return at;
}

std::vector<int64_t> byte_tokens(std::string_view text) {
  std::vector<int64_t> tokens(text.size());
  for (size_t i = 0; i < text.size(); ++i) tokens[i] = static_cast<unsigned char>(text[i]);
  return tokens;
}

int64_t write_byte_token_file(const std::string& path, std::string_view text, size_t begin, size_t end) {
  STRATA_CHECK(begin <= end && end <= text.size(), "write_byte_token_file: range [", begin, ", ", end,
               ") is outside the text of ", text.size(), " bytes");
  const std::vector<int64_t> tokens = byte_tokens(text.substr(begin, end - begin));
  write_token_file(path, tokens, 2, kByteVocabSize);
  return static_cast<int64_t>(tokens.size());
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  STRATA_CHECK(in, "cannot open '", path, "'");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  STRATA_CHECK(!in.bad(), "reading '", path, "' failed");
  return text;
}

}  // namespace strata::data
