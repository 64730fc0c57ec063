// TokenFile on the formats other tools write: llm.c token shards and nanoGPT's raw uint16
// .bin files (docs/data-format.md). The fixtures are written here, byte by byte.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "file_test_util.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using namespace strata::data;
using strata::testing::expect_error_mentions;
namespace st = strata::testing;
using Tokens = std::vector<int64_t>;
using Bytes = std::string;

namespace {

void put_le(Bytes& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i, v >>= 8) out.push_back(static_cast<char>(v & 0xff));
}

// llm.c's layout: 256 int32 (magic, version, token count, zeros), then the tokens.
Bytes llmc_shard(uint32_t magic, int32_t version, const Tokens& tokens, int token_bytes) {
  Bytes b;
  put_le(b, magic, 4);
  put_le(b, static_cast<uint32_t>(version), 4);
  put_le(b, tokens.size(), 4);
  b.resize(1024, 0);
  for (int64_t t : tokens) put_le(b, static_cast<uint64_t>(t), token_bytes);
  return b;
}

Bytes raw_uint16(const Tokens& tokens) {
  Bytes b;
  for (int64_t t : tokens) put_le(b, static_cast<uint64_t>(t), 2);
  return b;
}

class TokenFormatsTest : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const Bytes& bytes) const {
    st::write_bytes(dir_.file(name), bytes);
    return dir_.file(name);
  }
  st::TempDir dir_;
};

}  // namespace

TEST_F(TokenFormatsTest, ReadsLlmcGpt2Shards) {
  const Tokens tokens = {50256, 15496, 11, 995, 0, 50256, 7, 8, 9, 10};
  const std::string p = write("fineweb_train_000001.bin", llmc_shard(kLlmcMagicGpt2, 1, tokens, 2));
  TokenFile f = TokenFile::open(p);
  EXPECT_EQ(f.format(), TokenFormat::LlmC);
  EXPECT_EQ(f.token_bytes(), 2);
  EXPECT_EQ(f.token_count(), 10);
  EXPECT_EQ(f.tokens(0, 10), tokens);
  EXPECT_EQ(f.vocab_size(), 50257);  // no option: the largest token + 1
  EXPECT_NO_THROW(f.validate());
  Batch b = f.batch(std::vector<int64_t>{1}, 4);
  EXPECT_EQ(b.targets.select(0, 0).to_vector<int64_t>(), (Tokens{11, 995, 0, 50256}));

  TokenFile given = TokenFile::open(p, {.vocab_size = 50304});  // a padded model vocabulary
  EXPECT_EQ(given.vocab_size(), 50304);
  TokenFile small = TokenFile::open(p, {.vocab_size = 1000});
  expect_error_mentions([&] { small.validate(); }, {"fineweb_train_000001.bin", "token 0 is 50256", "vocab_size 1000"});
  expect_error_mentions([&] { small.batch(std::vector<int64_t>{1}, 2); }, {"token 1 is 15496", "vocab_size 1000"});
  EXPECT_NO_THROW(small.batch(std::vector<int64_t>{2}, 2));  // 11, 995, 0
}

TEST_F(TokenFormatsTest, ReadsLlmcLlama3Shards) {
  const Tokens tokens = {128000, 9906, 1917, 128001, 3};
  TokenFile f = TokenFile::open(write("llama.bin", llmc_shard(kLlmcMagicLlama3, 7, tokens, 4)));
  EXPECT_EQ(f.format(), TokenFormat::LlmC);
  EXPECT_EQ(f.token_bytes(), 4);
  EXPECT_EQ(f.tokens(0, 5), tokens);
  EXPECT_EQ(f.vocab_size(), 128002);
  // The format does not depend on the file name.
  TokenFile named = TokenFile::open(write("shard.data", llmc_shard(kLlmcMagicLlama3, 7, tokens, 4)));
  EXPECT_EQ(named.token(4), 3);
  TokenFile empty = TokenFile::open(write("empty.bin", llmc_shard(kLlmcMagicGpt2, 1, {}, 2)));
  EXPECT_EQ(empty.token_count(), 0);
  EXPECT_EQ(empty.vocab_size(), 1);
}

TEST_F(TokenFormatsTest, RejectsBadLlmcShards) {
  const Tokens tokens = {1, 2, 3};
  // Only the (magic, version) pairs llm.c writes.
  expect_error_mentions([&] { TokenFile::open(write("v2.bin", llmc_shard(kLlmcMagicGpt2, 2, tokens, 4))); },
                        {"v2.bin", "magic 20240520", "unsupported version 2", "version 1", "version 7"});
  expect_error_mentions([&] { TokenFile::open(write("v1.bin", llmc_shard(kLlmcMagicLlama3, 1, tokens, 2))); },
                        {"magic 20240801", "unsupported version 1"});
  Bytes shard = llmc_shard(kLlmcMagicGpt2, 1, tokens, 2);
  Bytes head = shard.substr(0, 100);
  expect_error_mentions([&] { TokenFile::open(write("head.bin", head)); },
                        {"head.bin", "truncated header", "100 bytes", "1024"});
  Bytes cut = shard.substr(0, shard.size() - 2);
  expect_error_mentions([&] { TokenFile::open(write("cut.bin", cut)); },
                        {"cut.bin", "1028 bytes", "3 tokens of 2 bytes", "exactly 1030", "(truncated)"});
  Bytes extra = shard;
  extra.push_back(0);
  expect_error_mentions([&] { TokenFile::open(write("extra.dat", extra)); },
                        {"1031 bytes", "exactly 1030", "(trailing bytes)"});
  Bytes negative = shard;
  negative[11] = '\xff';
  expect_error_mentions([&] { TokenFile::open(write("neg.bin", negative)); }, {"negative token count"});
  expect_error_mentions([&] { TokenFile::open(write("hellaswag_val.bin", llmc_shard(kLlmcMagicEval, 1, tokens, 2))); },
                        {"hellaswag_val.bin", "llm.c eval file", "not a token shard"});
  const std::string x = write("x.bin", llmc_shard(kLlmcMagicGpt2, 1, tokens, 2));
  expect_error_mentions([&] { TokenFile::open(x, {.vocab_size = 70000}); },
                        {"TokenFileOptions::vocab_size 70000", "[1, 65536]"});
}

TEST_F(TokenFormatsTest, ReadsNanoGptRawUint16) {
  const Tokens tokens = {464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13};
  TokenFile f = TokenFile::open(write("train.bin", raw_uint16(tokens)));
  EXPECT_EQ(f.format(), TokenFormat::RawUint16);
  EXPECT_EQ(f.token_bytes(), 2);
  EXPECT_EQ(f.token_count(), 10);
  EXPECT_EQ(f.tokens(0, 10), tokens);
  EXPECT_EQ(f.num_windows(3), 3);
  EXPECT_NO_THROW(f.validate());  // finds vocab_size instead of checking it
  EXPECT_EQ(f.vocab_size(), 21832);
  TokenFile given = TokenFile::open(f.path(), {.vocab_size = 50257});
  EXPECT_EQ(given.vocab_size(), 50257);
  EXPECT_NO_THROW(given.validate());
  TokenFile moved = std::move(given);
  EXPECT_EQ(moved.vocab_size(), 50257);
  EXPECT_EQ(moved.format(), TokenFormat::RawUint16);
}

TEST_F(TokenFormatsTest, RawNeedsABinNameAndAnEvenSize) {
  const Bytes raw = raw_uint16({1, 2, 3});
  expect_error_mentions([&] { TokenFile::open(write("train.tokens", raw)); },
                        {"train.tokens", "unknown format", "6 bytes starting with 01 00 02 00 03 00",
                         "does not end in .bin", "STRTOK01", "20240520", "raw little-endian uint16"});
  Bytes odd = raw;
  odd.push_back(4);
  expect_error_mentions([&] { TokenFile::open(write("odd.bin", odd)); }, {"odd.bin", "unknown format", "odd size"});
  expect_error_mentions([&] { TokenFile::open(write("empty.bin", "")); },
                        {"empty.bin", "empty (0 bytes)", "accepted formats"});
  // The documented risk: raw tokens whose first two happen to spell a magic are read as that
  // format (here 20240520 = 0x0134d888: tokens 0xd888, 0x0134), and then fail its checks.
  expect_error_mentions(
      [&] {
        TokenFile::open(write("unlucky.bin", raw_uint16({0xd888, 0x0134, 1, 0})));
      },
      {"unlucky.bin", "llm.c token shard", "truncated header"});
}

TEST_F(TokenFormatsTest, StrataFilesKeepTheirVocabulary) {
  const std::string p = dir_.file("corpus.bin");
  write_token_file(p, Tokens{1, 2, 3}, 2, 10);
  TokenFile f = TokenFile::open(p, {.vocab_size = 16});  // the model's vocabulary may be larger
  EXPECT_EQ(f.format(), TokenFormat::Strata);
  EXPECT_EQ(f.vocab_size(), 10);
  expect_error_mentions([&] { TokenFile::open(p, {.vocab_size = 5}); },
                        {"corpus.bin", "vocab_size 10 is larger than TokenFileOptions::vocab_size 5"});
  EXPECT_STREQ(token_format_name(TokenFormat::LlmC), "llm.c token shard");
}

// nanoGPT's prepare.py writes np.array(ids, dtype=np.uint16).tofile(...) and train.py reads
// np.memmap(..., dtype=np.uint16); llm.c writes its header with numpy too. Check both writers.
TEST_F(TokenFormatsTest, ReadsWhatNumpyWrites) {
  if (!st::python_has_module("numpy")) GTEST_SKIP() << "/usr/bin/python3 with numpy is not available";
  const std::string raw = dir_.file("val.bin"), shard = dir_.file("shard.bin");
  const std::string script =
      "import numpy as np, sys\n"
      "ids = np.arange(0, 60000, 7, dtype=np.uint16)\n"
      "ids.tofile(sys.argv[1])\n"
      "h = np.zeros(256, dtype=np.int32); h[0] = 20240801; h[1] = 7; h[2] = 3\n"
      "open(sys.argv[2], 'wb').write(h.tobytes() + np.array([5, 70000, 128255], dtype=np.uint32).tobytes())\n";
  const std::string cmd = std::string(st::kPython) + " -c " + st::shell_quote(script) + " " + st::shell_quote(raw) +
                          " " + st::shell_quote(shard);
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  TokenFile r = TokenFile::open(raw);
  EXPECT_EQ(r.format(), TokenFormat::RawUint16);
  ASSERT_EQ(r.token_count(), (60000 + 6) / 7);
  for (int64_t i = 0; i < r.token_count(); i += 997) EXPECT_EQ(r.token(i), 7 * i);
  TokenFile s = TokenFile::open(shard);
  EXPECT_EQ(s.format(), TokenFormat::LlmC);
  EXPECT_EQ(s.tokens(0, 3), (Tokens{5, 70000, 128255}));
}
