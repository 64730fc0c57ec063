// text_to_tokens INPUT.txt OUTPUT.tokens [--val-fraction F --val-output VAL.tokens]
//
// Byte-level tokenisation (strata/data/byte_text.h): every byte of the UTF-8 text is one token
// (vocab_size 256). Writes strata token files atomically (a reader sees the old file or the
// complete new one). The last --val-fraction of the text (moved to a character boundary) goes
// to --val-output. The text is read and written in chunks: any size fits in memory.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <string>

#include "strata/strata.h"
#include "text_to_tokens/byte_token_stream.h"

using namespace strata;

namespace {

struct Options {
  std::string input, output, val_output;
  double val_fraction = 0.0;
};

// Whether two paths name one file, also through links or another spelling; paths that do
// not exist yet are compared after resolving their existing directories.
bool same_file(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec);
  return fs::weakly_canonical(a, ec) == fs::weakly_canonical(b, ec);
}

int run(const Options& o) {
  // Before anything is read or written: an output that is the input, or both outputs one
  // file, would lose the text or the training tokens.
  for (const std::string* out : {&o.output, &o.val_output})
    STRATA_CHECK(out->empty() || !same_file(*out, o.input), "text_to_tokens: output '", *out, "' is the input file");
  STRATA_CHECK(o.val_output.empty() || !same_file(o.output, o.val_output), "text_to_tokens: --val-output '",
               o.val_output, "' is the output file '", o.output, "': pass another path for the validation tokens");
  const text_tokens::StreamResult r = text_tokens::stream_byte_tokens(
      {.input = o.input, .output = o.output, .val_output = o.val_output, .val_fraction = o.val_fraction});
  std::printf("%s: %llu bytes of UTF-8 text; byte-level tokens, vocab_size %lld\n", o.input.c_str(),
              static_cast<unsigned long long>(r.input_bytes), static_cast<long long>(data::kByteVocabSize));
  std::printf("%s: %llu tokens\n", o.output.c_str(), static_cast<unsigned long long>(r.train_tokens));
  if (!o.val_output.empty())
    std::printf("%s: %llu tokens\n", o.val_output.c_str(), static_cast<unsigned long long>(r.val_tokens));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "Turn a UTF-8 text file into strata token files of byte-level tokens (each byte is a token, "
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
  } catch (const std::exception& e) {  // strata::Error, and the OS's failures (e.g. out of memory)
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
