// Runs the text_to_tokens binary (argv[1]) on texts written here and reads its output back
// with TokenFile.
#include <gtest/gtest.h>
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
  int cli(const std::string& args) const {
    const std::string cmd = st::shell_quote(g_cli) + " " + args + " >" + st::shell_quote(path("log")) + " 2>&1";
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
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
  const std::string args = in + " " + quoted("train.tokens") + " --val-fraction 0.25 --val-output " + quoted("val.tokens");
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

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PATH/TO/text_to_tokens [gtest options]\n", argv[0]);
    return 2;
  }
  g_cli = argv[1];
  return RUN_ALL_TESTS();
}
