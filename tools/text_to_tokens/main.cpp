// text_to_tokens INPUT.txt OUTPUT.tokens [--val-fraction F --val-output VAL.tokens]
//
// Byte-level tokenisation: every byte of the UTF-8 text is one token (vocab_size 256), so no
// tokenizer is needed and any text round-trips exactly. Writes strata token files with
// write_token_file (atomic: a reader sees the old file or the complete new one). The last
// --val-fraction of the text (moved to a character boundary) goes to --val-output.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "strata/strata.h"

using namespace strata;

namespace {

constexpr int64_t kByteVocab = 256;

struct Options {
  std::string input, output, val_output;
  double val_fraction = 0.0;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  STRATA_CHECK(in, "text_to_tokens: cannot open '", path, "'");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  STRATA_CHECK(!in.bad(), "text_to_tokens: reading '", path, "' failed");
  return text;
}

// Offset of the first byte that breaks UTF-8, or -1: catches a binary or Latin-1 file given
// by mistake (the tokens would still be bytes, but not of the text the user meant).
int64_t first_invalid_utf8(const std::string& s) {
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

// Where the validation part starts: the last `fraction` of the bytes, moved forward past any
// continuation bytes so that no character is split between the two files.
size_t split_point(const std::string& text, double fraction) {
  auto at = text.size() - static_cast<size_t>(static_cast<double>(text.size()) * fraction);
  while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xc0) == 0x80) ++at;
  return at;
}

void write_bytes_as_tokens(const std::string& path, const std::string& text, size_t begin, size_t end) {
  std::vector<int64_t> tokens(end - begin);
  for (size_t i = begin; i < end; ++i) tokens[i - begin] = static_cast<unsigned char>(text[i]);
  data::write_token_file(path, tokens, 2, kByteVocab);
  std::printf("%s: %zu tokens\n", path.c_str(), tokens.size());
}

int run(const Options& o) {
  namespace fs = std::filesystem;
  for (const std::string* out : {&o.output, &o.val_output})
    STRATA_CHECK(out->empty() || !fs::exists(*out) || !fs::equivalent(*out, o.input), "text_to_tokens: output '",
                 *out, "' is the input file");
  const std::string text = read_file(o.input);
  const int64_t bad = first_invalid_utf8(text);
  STRATA_CHECK(bad < 0, "text_to_tokens: '", o.input, "' is not UTF-8 text: invalid byte sequence at offset ", bad);
  STRATA_CHECK(!text.empty(), "text_to_tokens: '", o.input, "' is empty");
  const size_t split = o.val_output.empty() ? text.size() : split_point(text, o.val_fraction);
  STRATA_CHECK(o.val_output.empty() || (split > 0 && split < text.size()), "text_to_tokens: --val-fraction ",
               o.val_fraction, " of ", text.size(), " bytes leaves an empty training or validation part");
  std::printf("%s: %zu bytes of UTF-8 text; byte-level tokens, vocab_size %lld\n", o.input.c_str(), text.size(),
              static_cast<long long>(kByteVocab));
  write_bytes_as_tokens(o.output, text, 0, split);
  if (!o.val_output.empty()) write_bytes_as_tokens(o.val_output, text, split, text.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Turn a UTF-8 text file into strata token files of byte-level tokens (each byte is a token, "
               "vocab_size 256)"};
  app.add_option("input", o.input, "UTF-8 text file")->required()->check(CLI::ExistingFile);
  app.add_option("output", o.output, "token file for the training part (written atomically)")->required();
  auto* fraction = app.add_option("--val-fraction", o.val_fraction, "share of the text, from its end, for validation")
                       ->check(CLI::Range(0.0, 1.0).description("in (0, 1)"));
  auto* val = app.add_option("--val-output", o.val_output, "token file for the validation part");
  fraction->needs(val);
  val->needs(fraction);
  CLI11_PARSE(app, argc, argv);
  try {
    return run(o);
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
