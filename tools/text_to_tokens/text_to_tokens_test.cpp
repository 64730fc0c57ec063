// Runs the text_to_tokens binary (argv[1]) on texts written here and reads its output back
// with TokenFile.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "strata/strata.h"

namespace fs = std::filesystem;
using strata::data::TokenFile;

namespace {

std::string g_cli;

class TextToTokens : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("strata_text_to_tokens_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string write_text(const std::string& name, const std::string& text) const {
    std::ofstream(path(name), std::ios::binary) << text;
    return path(name);
  }
  // Exit status of the CLI; its stdout and stderr go to `log`.
  int cli(const std::string& args) const {
    const std::string cmd = "'" + g_cli + "' " + args + " >'" + path("log") + "' 2>&1";
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::string log() const {
    std::ifstream in(path("log"));
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  static std::vector<int64_t> bytes_of(const std::string& s) {
    std::vector<int64_t> out;
    for (unsigned char c : s) out.push_back(c);
    return out;
  }
  fs::path dir_;
};

}  // namespace

TEST_F(TextToTokens, EveryByteIsAToken) {
  const std::string text = "To be, or not to be: na\xc3\xafve \xe2\x9c\x93\n";  // ASCII, 2- and 3-byte characters
  const std::string in = write_text("in.txt", text);
  ASSERT_EQ(cli("'" + in + "' '" + path("out.tokens") + "'"), 0) << log();
  EXPECT_NE(log().find("vocab_size 256"), std::string::npos) << log();
  EXPECT_NE(log().find(std::to_string(text.size()) + " tokens"), std::string::npos) << log();
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
  ASSERT_EQ(cli("'" + in + "' '" + path("train.tokens") + "' --val-fraction 0.25 --val-output '" + path("val.tokens") +
                "'"),
            0)
      << log();
  TokenFile train = TokenFile::open(path("train.tokens")), val = TokenFile::open(path("val.tokens"));
  EXPECT_EQ(train.tokens(0, train.token_count()), bytes_of(text.substr(0, 16)));
  EXPECT_EQ(val.tokens(0, val.token_count()), bytes_of(text.substr(16)));
}

TEST_F(TextToTokens, RefusesBadInput) {
  const std::string binary = write_text("bin.txt", std::string("ok\xff\xfe", 4));
  EXPECT_EQ(cli("'" + binary + "' '" + path("o.tokens") + "'"), 1);
  EXPECT_NE(log().find("not UTF-8 text: invalid byte sequence at offset 2"), std::string::npos) << log();
  EXPECT_FALSE(fs::exists(path("o.tokens")));
  const std::string in = write_text("in.txt", "hello");
  EXPECT_NE(cli("'" + in + "' '" + path("o.tokens") + "' --val-fraction 0.5"), 0);  // needs --val-output
  EXPECT_EQ(cli("'" + in + "' '" + path("o.tokens") + "' --val-fraction 0.01 --val-output '" + path("v.tokens") + "'"),
            1);
  EXPECT_NE(log().find("leaves an empty training or validation part"), std::string::npos) << log();
  EXPECT_EQ(cli("'" + in + "' '" + in + "'"), 1);
  EXPECT_NE(log().find("is the input file"), std::string::npos) << log();
  EXPECT_NE(cli("'" + path("missing.txt") + "' '" + path("o.tokens") + "'"), 0);
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
