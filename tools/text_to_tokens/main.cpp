// text_to_tokens INPUT.txt OUTPUT.tokens [--val-fraction F --val-output VAL.tokens]
//
// Byte-level tokenisation (strata/data/byte_text.h): every byte of the UTF-8 text is one token
// (vocab_size 256). Writes strata token files atomically (a reader sees the old file or the
// complete new one). The last --val-fraction of the text (moved to a character boundary) goes
// to --val-output.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <string>

#include "strata/strata.h"

using namespace strata;

namespace {

struct Options {
  std::string input, output, val_output;
  double val_fraction = 0.0;
};

void write_part(const std::string& path, const std::string& text, size_t begin, size_t end) {
  std::printf("%s: %lld tokens\n", path.c_str(),
              static_cast<long long>(data::write_byte_token_file(path, text, begin, end)));
}

int run(const Options& o) {
  namespace fs = std::filesystem;
  for (const std::string* out : {&o.output, &o.val_output})
    STRATA_CHECK(out->empty() || !fs::exists(*out) || !fs::equivalent(*out, o.input), "text_to_tokens: output '",
                 *out, "' is the input file");
  const std::string text = data::read_text_file(o.input);
  const int64_t bad = data::first_invalid_utf8(text);
  STRATA_CHECK(bad < 0, "text_to_tokens: '", o.input, "' is not UTF-8 text: invalid byte sequence at offset ", bad);
  STRATA_CHECK(!text.empty(), "text_to_tokens: '", o.input, "' is empty");
  const size_t split = o.val_output.empty() ? text.size() : data::utf8_split_point(text, o.val_fraction);
  STRATA_CHECK(o.val_output.empty() || (split > 0 && split < text.size()), "text_to_tokens: --val-fraction ",
               o.val_fraction, " of ", text.size(), " bytes leaves an empty training or validation part");
  std::printf("%s: %zu bytes of UTF-8 text; byte-level tokens, vocab_size %lld\n", o.input.c_str(), text.size(),
              static_cast<long long>(data::kByteVocabSize));
  write_part(o.output, text, 0, split);
  if (!o.val_output.empty()) write_part(o.val_output, text, split, text.size());
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
