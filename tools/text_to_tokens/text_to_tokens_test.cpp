// Runs the text_to_tokens binary (argv[1]) on texts written here and reads its output back
// with TokenFile.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "file_test_util.h"
#include "strata/strata.h"

namespace st = strata::testing;
using strata::data::TokenFile;

namespace {

std::string g_cli;

class TextToTokens : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return dir_.file(name); }
  // Writes `text` to the file `name`; returns its path quoted for the shell, as quoted() does.
  std::string write_text(const std::string& name, const std::string& text) const {
    st::write_bytes(path(name), text);
    return st::shell_quote(path(name));
  }
  // Exit status of the CLI run with `args`; its stdout and stderr go to log().
  // `prefix`: shell commands run first in the same shell (e.g. a ulimit).
  int cli(const std::string& args, const std::string& prefix = "") const {
    const std::string cmd =
        prefix + st::shell_quote(g_cli) + " " + args + " >" + st::shell_quote(path("log")) + " 2>&1";
    const int status = std::system(("(" + cmd + ")").c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  // The largest resident set of any CLI run so far, in bytes (Linux reports kB).
  static int64_t peak_child_rss_bytes() {
    rusage usage{};
    getrusage(RUSAGE_CHILDREN, &usage);
    return static_cast<int64_t>(usage.ru_maxrss) * 1024;
  }
  std::string log() const { return st::read_bytes(path("log")); }
  std::string quoted(const std::string& name) const { return st::shell_quote(path(name)); }
  static std::vector<int64_t> bytes_of(const std::string& s) {
    std::vector<int64_t> out;
    for (unsigned char c : s) out.push_back(c);
    return out;
  }
  st::TempDir dir_;
};

}  // namespace

TEST_F(TextToTokens, EveryByteIsAToken) {
  const std::string text = "To be, or not to be: na\xc3\xafve \xe2\x9c\x93\n";  // ASCII, 2- and 3-byte characters
  const std::string in = write_text("in.txt", text);
  ASSERT_EQ(cli(in + " " + quoted("out.tokens")), 0) << log();
  EXPECT_CONTAINS(log(), "vocab_size 256");
  EXPECT_CONTAINS(log(), std::to_string(text.size()) + " tokens");
  TokenFile f = TokenFile::open(path("out.tokens"));
  EXPECT_EQ(f.format(), strata::data::TokenFormat::Strata);
  EXPECT_EQ(f.vocab_size(), 256);
  EXPECT_EQ(f.tokens(0, f.token_count()), bytes_of(text));
}

TEST_F(TextToTokens, SplitsTheEndOffForValidationAtACharacterBoundary) {
  // 20 bytes; 0.25 would start the validation part at byte 15, inside the 3-byte character.
  const std::string text = "abcdefghijklm\xe2\x9c\x93xyzw";
  ASSERT_EQ(text.size(), 20u);
  const std::string in = write_text("in.txt", text);
  const std::string args =
      in + " " + quoted("train.tokens") + " --val-fraction 0.25 --val-output " + quoted("val.tokens");
  ASSERT_EQ(cli(args), 0) << log();
  TokenFile train = TokenFile::open(path("train.tokens")), val = TokenFile::open(path("val.tokens"));
  EXPECT_EQ(train.tokens(0, train.token_count()), bytes_of(text.substr(0, 16)));
  EXPECT_EQ(val.tokens(0, val.token_count()), bytes_of(text.substr(16)));
}

TEST_F(TextToTokens, RefusesBadInput) {
  const std::string binary = write_text("bin.txt", std::string("ok\xff\xfe", 4));
  EXPECT_EQ(cli(binary + " " + quoted("o.tokens")), 1);
  EXPECT_CONTAINS(log(), "not UTF-8 text: invalid byte sequence at offset 2");
  EXPECT_FALSE(std::filesystem::exists(path("o.tokens")));
  const std::string in = write_text("in.txt", "hello");
  EXPECT_NE(cli(in + " " + quoted("o.tokens") + " --val-fraction 0.5"), 0);  // needs --val-output
  EXPECT_EQ(cli(in + " " + quoted("o.tokens") + " --val-fraction 0.01 --val-output " + quoted("v.tokens")), 1);
  EXPECT_CONTAINS(log(), "leaves an empty training or validation part");
  EXPECT_EQ(cli(in + " " + in), 1);
  EXPECT_CONTAINS(log(), "is the input file");
  EXPECT_NE(cli(quoted("missing.txt") + " " + quoted("o.tokens")), 0);
}

// AddressSanitizer reserves terabytes of shadow address space at start, which a ulimit -v forbids.
#if defined(__SANITIZE_ADDRESS__)
constexpr const char* kAddressSpaceLimit = "";
#else
constexpr const char* kAddressSpaceLimit = "ulimit -v 4000000;";
#endif

TEST_F(TextToTokens, RefusesInputsThatAreNotRegularFiles) {
  // /dev/zero has no end: it used to be read until std::bad_alloc (SIGABRT). The address space
  // is bounded (except under ASan) so that a build that reads it whole fails fast instead of
  // filling the memory.
  EXPECT_EQ(cli("/dev/zero " + quoted("o.tokens"), kAddressSpaceLimit), 1) << log();
  EXPECT_CONTAINS(log(), "'/dev/zero' is not a regular file");
  EXPECT_FALSE(std::filesystem::exists(path("o.tokens")));
}

TEST_F(TextToTokens, StreamsTheTextInsteadOfLoadingIt) {
  // 128 MB of text: a conversion that held the text and its tokens in memory would grow by
  // more than a gigabyte; streamed, it grows by a few MB. The file is written by the shell:
  // system()'s child reports this process's own peak too (it shares its memory until exec).
  const std::string line = "All work and no play makes Jack a dull boy. \xe2\x9c\x93\n";
  const size_t size = size_t{128} << 20;
  ASSERT_EQ(std::system(("printf '" + line + "' | (yes \"$(cat)\" || true) | head -c " + std::to_string(size) + " > " +
                         quoted("big.txt"))
                            .c_str()),
            0);
  ASSERT_EQ(std::filesystem::file_size(path("big.txt")), size);
  ASSERT_EQ(cli(write_text("small.txt", line) + " " + quoted("small.tokens")), 0) << log();
  const int64_t before = peak_child_rss_bytes();
  const std::string args =
      quoted("big.txt") + " " + quoted("t.tokens") + " --val-fraction 0.001 --val-output " + quoted("v.tokens");
  ASSERT_EQ(cli(args), 0) << log();
  EXPECT_LT(peak_child_rss_bytes() - before, static_cast<int64_t>(size / 4)) << "the peak grew with the text";

  const std::string text = st::read_bytes(path("big.txt"));
  TokenFile train = TokenFile::open(path("t.tokens")), val = TokenFile::open(path("v.tokens"));
  const size_t split = strata::data::utf8_split_point(text, 0.001);
  EXPECT_EQ(train.token_count(), static_cast<int64_t>(split));
  EXPECT_EQ(train.tokens(0, static_cast<int64_t>(line.size())), bytes_of(line));
  EXPECT_EQ(train.tokens(static_cast<int64_t>(split) - 3, 3), bytes_of(text.substr(split - 3, 3)));
  EXPECT_EQ(val.tokens(0, val.token_count()), bytes_of(text.substr(split)));
}

TEST_F(TextToTokens, ChecksUtf8AcrossTheChunksItReads) {
  // Read 1 MiB at a time: a character across a chunk boundary is whole, and a bad byte
  // after the first chunk is reported at its offset in the file.
  const std::string spanning = std::string((size_t{1} << 20) - 1, 'a') + "\xe2\x9c\x93" + "tail\n";
  ASSERT_EQ(cli(write_text("span.txt", spanning) + " " + quoted("s.tokens")), 0) << log();
  TokenFile f = TokenFile::open(path("s.tokens"));
  EXPECT_EQ(f.tokens((int64_t{1} << 20) - 2, 5), bytes_of("a\xe2\x9c\x93t"));
  const std::string bad = std::string((size_t{1} << 20) + 5, 'a') + "\xff";
  EXPECT_EQ(cli(write_text("bad.txt", bad) + " " + quoted("b.tokens")), 1);
  EXPECT_CONTAINS(log(), "invalid byte sequence at offset 1048581");
  EXPECT_FALSE(std::filesystem::exists(path("b.tokens")));
}

TEST_F(TextToTokens, RefusesAValidationOutputThatIsTheOutput) {
  // An earlier file at the output path must survive: the check comes before any write.
  const std::string in = write_text("in.txt", "hello, world\n");
  st::write_bytes(path("o.tokens"), "earlier tokens");
  std::filesystem::create_directory(path("sub"));
  std::filesystem::create_symlink(path("o.tokens"), path("link.tokens"));
  const std::string other_spelling = st::shell_quote(path("sub") + "/../o.tokens");
  for (const std::string& val : {quoted("o.tokens"), other_spelling, quoted("link.tokens")}) {
    EXPECT_EQ(cli(in + " " + quoted("o.tokens") + " --val-fraction 0.5 --val-output " + val), 1) << val;
    EXPECT_CONTAINS(log(), "is the output file");
    EXPECT_EQ(st::read_bytes(path("o.tokens")), "earlier tokens");
  }
  // Neither file exists yet: the same path spelt two ways.
  EXPECT_EQ(cli(in + " " + quoted("new.tokens") + " --val-fraction 0.5 --val-output " +
                st::shell_quote(path("sub") + "/../new.tokens")),
            1);
  EXPECT_CONTAINS(log(), "is the output file");
  EXPECT_FALSE(std::filesystem::exists(path("new.tokens")));
}

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PATH/TO/text_to_tokens [gtest options]\n", argv[0]);
    return 2;
  }
  g_cli = argv[1];
  return RUN_ALL_TESTS();
}
