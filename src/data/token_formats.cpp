#include "data/token_formats.h"

#include <cstdio>
#include <cstring>

#include "strata/core/error.h"

namespace strata::data::detail {
namespace {

constexpr const char* kAccepted =
    "accepted formats: a strata token file (magic \"STRTOK01\"), an llm.c token shard (1024-byte header, "
    "int32 magic 20240520 or 20240801), or raw little-endian uint16 tokens as nanoGPT writes them (no header; "
    "only for a file named *.bin with an even size)";

// Largest vocabulary a token width can address: ids 0 .. 2^(8*bytes)-1.
uint64_t max_vocab(int token_bytes) { return 1ull << (8 * token_bytes); }

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// The first bytes in hex, for errors about a file nobody recognises.
std::string hex_prefix(const unsigned char* head, uint64_t file_bytes) {
  std::string out;
  const uint64_t n = file_bytes < 8 ? file_bytes : 8;
  for (uint64_t i = 0; i < n; ++i) {
    char b[4];
    std::snprintf(b, sizeof(b), "%s%02x", i ? " " : "", head[i]);
    out += b;
  }
  return out.empty() ? "none" : out;
}

TokenLayout strata_layout(const std::string& path, const unsigned char* header, uint64_t file_bytes) {
  STRATA_CHECK(file_bytes >= static_cast<uint64_t>(kTokenFileHeaderBytes), "token file '", path, "': ", file_bytes,
               " bytes is too short for the ", kTokenFileHeaderBytes, "-byte header");
  const uint64_t version = load_le(header + 8, 4);
  STRATA_CHECK(version == kTokenFileVersion, "token file '", path, "': unsupported version ", version,
               " (field 'version' at offset 8; this build reads version ", kTokenFileVersion, ")");
  const uint64_t token_bytes = load_le(header + 12, 4);
  STRATA_CHECK(token_bytes == 2 || token_bytes == 4, "token file '", path, "': unsupported token_bytes ", token_bytes,
               " (field 'token_bytes' at offset 12 must be 2 or 4)");
  const int width = static_cast<int>(token_bytes);
  const uint64_t token_count = load_le(header + 16, 8);
  const uint64_t vocab_size = load_le(header + 24, 8);
  STRATA_CHECK(vocab_size >= 1 && vocab_size <= max_vocab(width), "token file '", path, "': vocab_size ", vocab_size,
               " (field 'vocab_size' at offset 24) must be in [1, ", max_vocab(width), "] for token_bytes ",
               token_bytes);
  for (int i = 32; i < kTokenFileHeaderBytes; ++i)
    STRATA_CHECK(header[i] == 0, "token file '", path, "': reserved header byte at offset ", i, " is ",
                 static_cast<int>(header[i]), ", must be 0 in version ", kTokenFileVersion);
  const uint64_t max_count = (UINT64_MAX - kTokenFileHeaderBytes) / token_bytes;
  STRATA_CHECK(token_count <= max_count && token_count <= static_cast<uint64_t>(INT64_MAX), "token file '", path,
               "': token_count ", token_count, " (field 'token_count' at offset 16) is impossibly large");
  const uint64_t expected = kTokenFileHeaderBytes + token_count * token_bytes;
  STRATA_CHECK(file_bytes == expected, "token file '", path, "': the file has ", file_bytes, " bytes but token_count ",
               token_count, " with token_bytes ", token_bytes, " needs exactly ", expected,
               file_bytes < expected ? " (truncated)" : " (trailing bytes)");
  return {TokenFormat::Strata, kTokenFileHeaderBytes, width, static_cast<int64_t>(token_count),
          static_cast<int64_t>(vocab_size)};
}

TokenLayout llmc_layout(const std::string& path, const unsigned char* head, uint64_t file_bytes, uint32_t magic) {
  STRATA_CHECK(file_bytes >= static_cast<uint64_t>(kLlmcHeaderBytes), "token file '", path,
               "': llm.c token shard (magic ", magic, ") with a truncated header: the file has ", file_bytes,
               " bytes, the header alone is ", kLlmcHeaderBytes);
  const auto version = static_cast<int32_t>(load_le(head + 4, 4));
  // llm.c pairs each magic with one version and token width (dev/data/data_common.py).
  const bool gpt2 = magic == kLlmcMagicGpt2 && version == 1;
  const bool llama3 = magic == kLlmcMagicLlama3 && version == 7;
  STRATA_CHECK(gpt2 || llama3, "token file '", path, "': llm.c token shard with magic ", magic,
               " has unsupported version ", version, " (header[1]; this build reads magic ", kLlmcMagicGpt2,
               " version 1 with uint16 tokens and magic ", kLlmcMagicLlama3, " version 7 with uint32 tokens)");
  const int width = gpt2 ? 2 : 4;
  const auto count = static_cast<int32_t>(load_le(head + 8, 4));
  STRATA_CHECK(count >= 0, "token file '", path, "': llm.c token shard has a negative token count ", count,
               " (header[2])");
  const uint64_t expected = kLlmcHeaderBytes + static_cast<uint64_t>(count) * width;
  STRATA_CHECK(file_bytes == expected, "token file '", path, "': llm.c token shard of ", file_bytes,
               " bytes, but its header's ", count, " tokens of ", width, " bytes need exactly ", expected,
               file_bytes < expected ? " (truncated)" : " (trailing bytes)");
  return {TokenFormat::LlmC, kLlmcHeaderBytes, width, count, 0};
}

}  // namespace

uint64_t load_le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

TokenLayout detect_token_layout(const std::string& path, const unsigned char* head, uint64_t file_bytes) {
  STRATA_CHECK(file_bytes > 0, "token file '", path, "': the file is empty (0 bytes); ", kAccepted);
  if (file_bytes >= sizeof(kTokenFileMagic) && std::memcmp(head, kTokenFileMagic, sizeof(kTokenFileMagic)) == 0)
    return strata_layout(path, head, file_bytes);
  const auto magic = file_bytes >= 4 ? static_cast<uint32_t>(load_le(head, 4)) : 0u;
  if (magic == kLlmcMagicGpt2 || magic == kLlmcMagicLlama3) return llmc_layout(path, head, file_bytes, magic);
  // llm.c's multiple-choice eval files share the header layout but hold no token stream.
  STRATA_CHECK(magic != kLlmcMagicEval, "token file '", path, "': an llm.c eval file (magic ", kLlmcMagicEval,
               ", e.g. HellaSwag), not a token shard; ", kAccepted);
  // Raw uint16 has no magic, so it is the fallback, and only where nanoGPT's naming says so.
  const bool named_bin = ends_with(path, ".bin");
  if (named_bin && file_bytes % 2 == 0) return {TokenFormat::RawUint16, 0, 2, static_cast<int64_t>(file_bytes / 2), 0};
  STRATA_FAIL("token file '", path, "': unknown format: ", file_bytes, " bytes starting with ",
              hex_prefix(head, file_bytes), " match no known magic",
              named_bin ? ", and an odd size cannot be raw uint16 tokens" : ", and the name does not end in .bin", "; ",
              kAccepted);
}

}  // namespace strata::data::detail
