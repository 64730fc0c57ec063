#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "strata/strata.h"

using namespace strata;
using namespace strata::data;
using namespace strata::checkpoint;
namespace fs = std::filesystem;
using Tokens = std::vector<int64_t>;

namespace {

// Expects `f` to throw strata::Error whose message contains every one of `parts`.
template <class F>
void expect_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "expected a strata::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

std::vector<int64_t> row(const Tensor& t, int64_t r) { return t.select(0, r).to_vector<int64_t>(); }

}  // namespace

// ---------------------------------------------------------------- synthetic task

TEST(SyntheticTask, FormatAndTokenizationRoundTrip) {
  SyntheticTask task({.digits = 3});
  EXPECT_EQ(task.vocab_size(), 14);
  EXPECT_EQ(task.prompt_length(), 8);
  EXPECT_EQ(task.example_length(), 13);
  EXPECT_EQ(task.sequence_length(), 12);
  Example ex = task.make_example(42, 917);  // 959 -> "0959" reversed
  EXPECT_EQ(task.decode(ex.tokens), "042+917=9590\n");
  EXPECT_EQ(ex.prompt_length, 8);
  EXPECT_EQ(task.decode(task.make_example(999, 999).tokens), "999+999=8991\n");
  const std::string text = "0123456789+=\n_";
  EXPECT_EQ(task.decode(task.encode(text)), text);
  EXPECT_EQ(task.encode(text), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}));
  expect_error([&] { task.encode("12x"); }, {"position 2", "not in the vocabulary"});
  expect_error([&] { task.decode(std::vector<int64_t>{1, 14}); }, {"token 14", "position 1"});
  expect_error([&] { task.decode(std::vector<int64_t>{-1}); }, {"token -1"});
  expect_error([&] { task.make_example(1000, 0); }, {"below 10^3"});
}

TEST(SyntheticTask, SamplesAreCorrectAdditions) {
  for (int digits : {1, 3, 7, 18}) {
    SyntheticTask task({.digits = digits, .seed = 5, .eval_fraction = 0.3});
    for (uint64_t i = 0; i < 50; ++i) {
      for (DataSplit split : {DataSplit::Train, DataSplit::Eval}) {
        Example ex = task.sample(i, split);
        std::string text = task.decode(ex.tokens);
        ASSERT_EQ(static_cast<int64_t>(text.size()), task.example_length());
        uint64_t a = std::stoull(text.substr(0, static_cast<size_t>(digits)));
        uint64_t b = std::stoull(text.substr(static_cast<size_t>(digits) + 1, static_cast<size_t>(digits)));
        EXPECT_EQ(a, ex.a);
        EXPECT_EQ(b, ex.b);
        std::string answer = text.substr(static_cast<size_t>(2 * digits + 2), static_cast<size_t>(digits) + 1);
        std::reverse(answer.begin(), answer.end());
        EXPECT_EQ(std::stoull(answer), a + b) << text;
        EXPECT_EQ(text.back(), '\n');
      }
    }
  }
}

TEST(SyntheticTask, DeterministicInSeedAndIndex) {
  SyntheticTask a({.seed = 7}), b({.seed = 7}), c({.seed = 8});
  int differ_seed = 0, differ_index = 0;
  for (uint64_t i = 0; i < 200; ++i) {
    EXPECT_EQ(a.sample(i).tokens, b.sample(i).tokens);
    EXPECT_EQ(a.sample(i, DataSplit::Eval).tokens, b.sample(i, DataSplit::Eval).tokens);
    differ_seed += a.sample(i).tokens != c.sample(i).tokens;
    differ_index += a.sample(i).tokens != a.sample(i + 1).tokens;
  }
  // 10^6 problems: a collision is rare, but allow a couple.
  EXPECT_GE(differ_seed, 195);
  EXPECT_GE(differ_index, 195);
}

TEST(SyntheticTask, TrainAndEvalProblemsNeverOverlap) {
  SyntheticTask task({.digits = 2, .seed = 3, .eval_fraction = 0.05});
  // digits=2: all 10^4 problems can be enumerated; the eval share is near eval_fraction.
  int eval_problems = 0;
  for (uint64_t a = 0; a < 100; ++a)
    for (uint64_t b = 0; b < 100; ++b) eval_problems += task.is_eval_problem(a, b);
  EXPECT_GT(eval_problems, 350);
  EXPECT_LT(eval_problems, 650);
  std::set<std::pair<uint64_t, uint64_t>> train, eval;
  for (uint64_t i = 0; i < 20000; ++i) {
    Example ex = task.sample(i, DataSplit::Train);
    EXPECT_FALSE(task.is_eval_problem(ex.a, ex.b));
    train.insert({ex.a, ex.b});
  }
  for (uint64_t i = 0; i < 2000; ++i) {
    Example ex = task.sample(i, DataSplit::Eval);
    EXPECT_TRUE(task.is_eval_problem(ex.a, ex.b));
    eval.insert({ex.a, ex.b});
  }
  EXPECT_GT(train.size(), 8000u);  // 20000 draws cover ~1 - e^-2 of the ~9500 train problems
  EXPECT_GT(eval.size(), 300u);
  for (const auto& p : eval) EXPECT_EQ(train.count(p), 0u);
  // The held-out set is fixed across seeds, so runs with different seeds never train on it.
  SyntheticTask other({.digits = 2, .seed = 99, .eval_fraction = 0.05});
  for (uint64_t i = 0; i < 2000; ++i) {
    Example ex = other.sample(i, DataSplit::Train);
    EXPECT_EQ(eval.count({ex.a, ex.b}), 0u);
  }
}

TEST(SyntheticTask, BatchTargetsOnlyTheAnswer) {
  SyntheticTask task({.digits = 3, .seed = 1});
  std::vector<int64_t> idx = {5, 0, 17};
  Batch batch = task.make_batch(idx);
  const int64_t T = task.sequence_length(), P = task.prompt_length();
  ASSERT_EQ(batch.inputs.shape(), Shape({3, T}));
  ASSERT_EQ(batch.targets.shape(), Shape({3, T}));
  EXPECT_EQ(batch.inputs.dtype(), DType::Int64);
  EXPECT_EQ(batch.targets.dtype(), DType::Int64);
  for (int64_t r = 0; r < 3; ++r) {
    std::vector<int64_t> tok = task.sample(static_cast<uint64_t>(idx[static_cast<size_t>(r)])).tokens;
    std::vector<int64_t> in = row(batch.inputs, r), tg = row(batch.targets, r);
    for (int64_t t = 0; t < T; ++t) {
      EXPECT_EQ(in[static_cast<size_t>(t)], tok[static_cast<size_t>(t)]);
      EXPECT_EQ(tg[static_cast<size_t>(t)], t + 1 < P ? kIgnoreIndex : tok[static_cast<size_t>(t + 1)]) << t;
    }
    EXPECT_EQ(std::count_if(tg.begin(), tg.end(), [](int64_t v) { return v != kIgnoreIndex; }), task.answer_length());
  }
  // Padding to a longer context: pad inputs, ignored targets.
  Batch padded = task.make_batch(idx, DataSplit::Train, T + 4);
  ASSERT_EQ(padded.inputs.shape(), Shape({3, T + 4}));
  std::vector<int64_t> in = row(padded.inputs, 1), tg = row(padded.targets, 1);
  for (int64_t t = T; t < T + 4; ++t) {
    EXPECT_EQ(in[static_cast<size_t>(t)], SyntheticTask::kPad);
    EXPECT_EQ(tg[static_cast<size_t>(t)], kIgnoreIndex);
  }
  EXPECT_EQ(row(padded.targets, 1).at(static_cast<size_t>(T - 1)), SyntheticTask::kEnd);
  // Eval batches come from the eval split.
  Batch eval = task.make_batch(idx, DataSplit::Eval);
  std::vector<int64_t> eval_tokens = task.sample(5, DataSplit::Eval).tokens;
  eval_tokens.pop_back();
  EXPECT_EQ(row(eval.inputs, 0), eval_tokens);
  EXPECT_NE(row(eval.inputs, 0), row(batch.inputs, 0));
  expect_error([&] { task.make_batch(idx, DataSplit::Train, T - 1); }, {"seq_len 11", "12"});
  expect_error([&] { task.make_batch(std::vector<int64_t>{-1}); }, {"negative index"});
}

TEST(SyntheticTask, OptionsAreChecked) {
  expect_error([] { SyntheticTask({.digits = 0}); }, {"digits"});
  expect_error([] { SyntheticTask({.digits = 19}); }, {"digits"});
  expect_error([] { SyntheticTask({.eval_fraction = 0.0}); }, {"eval_fraction"});
  expect_error([] { SyntheticTask({.eval_fraction = 0.9}); }, {"eval_fraction"});
  // 100 problems at 1e-4: the eval split would be empty and sampling from it would never end.
  expect_error([] { SyntheticTask({.digits = 1, .eval_fraction = 1e-4}); }, {"eval split holds 0 of 100"});
}

namespace {

// A perfect model for the task, but only when what it was fed back is right: at an answer
// position it checks the answer tokens before it and emits a wrong token after any mistake.
// So it scores 1.0 only if evaluate() feeds its own greedy choices back correctly.
Tensor oracle_logits(const SyntheticTask& task, const Tensor& tokens, int calls_seen_digit_wrong_at = -1) {
  const int64_t B = tokens.size(0), T = tokens.size(1), V = task.vocab_size(), P = task.prompt_length();
  const int d = task.options().digits;
  std::vector<float> logits(static_cast<size_t>(B * T * V), 0.0f);
  for (int64_t r = 0; r < B; ++r) {
    std::vector<int64_t> tok = row(tokens, r);
    uint64_t a = 0, b = 0;
    for (int i = 0; i < d; ++i) {
      a = a * 10 + static_cast<uint64_t>(tok[static_cast<size_t>(i)]);
      b = b * 10 + static_cast<uint64_t>(tok[static_cast<size_t>(d + 1 + i)]);
    }
    std::vector<int64_t> truth = task.make_example(a, b).tokens;
    bool fed_ok = true;
    for (int64_t t = 0; t < T; ++t) {
      if (t >= P) fed_ok = fed_ok && tok[static_cast<size_t>(t)] == truth[static_cast<size_t>(t)];
      int64_t want = truth[static_cast<size_t>(t + 1)];
      if (!fed_ok || t - (P - 1) == calls_seen_digit_wrong_at) want = (want + 1) % 10;
      logits[static_cast<size_t>((r * T + t) * V + want)] = 5.0f;
    }
  }
  return from_vector(logits, {B, T, V});
}

}  // namespace

TEST(SyntheticTask, EvaluateScoresAPerfectModelOne) {
  SyntheticTask task({.digits = 3, .seed = 2});
  int calls = 0;
  EvalResult res = task.evaluate(
      [&](const Tensor& tokens) {
        ++calls;
        EXPECT_EQ(tokens.shape(), Shape({100, task.sequence_length()}));
        EXPECT_FALSE(grad_enabled());
        return oracle_logits(task, tokens);
      },
      300, 100);
  EXPECT_EQ(res.accuracy, 1.0);
  EXPECT_EQ(res.token_accuracy, 1.0);
  EXPECT_EQ(res.examples, 300);
  EXPECT_DOUBLE_EQ(res.chance, 1e-4);
  EXPECT_EQ(calls, 3 * task.answer_length());  // 3 batches, one call per answer token
  // float64 logits with a padded vocabulary (V = 16 > 14) are accepted.
  EvalResult wide = task.evaluate(
      [&](const Tensor& tokens) {
        std::vector<float> l = oracle_logits(task, tokens).to_vector<float>(), wide_l;
        for (size_t i = 0; i < l.size(); i += 14) {
          wide_l.insert(wide_l.end(), l.begin() + static_cast<std::ptrdiff_t>(i),
                        l.begin() + static_cast<std::ptrdiff_t>(i + 14));
          wide_l.insert(wide_l.end(), {0.0f, 0.0f});
        }
        return from_vector(wide_l, {tokens.size(0), tokens.size(1), 16}).to(DType::Float64);
      },
      50);
  EXPECT_EQ(wide.accuracy, 1.0);
}

TEST(SyntheticTask, EvaluateScoresWrongModelsZero) {
  SyntheticTask task({.digits = 3, .seed = 2});
  // Gets the first answer digit wrong, then (having been fed a wrong digit) everything.
  EvalResult first_wrong = task.evaluate([&](const Tensor& t) { return oracle_logits(task, t, 0); }, 200);
  EXPECT_EQ(first_wrong.accuracy, 0.0);
  EXPECT_EQ(first_wrong.token_accuracy, 0.0);
  // Gets only the last digit wrong: every earlier token counts, the exact match does not.
  EvalResult last_wrong = task.evaluate([&](const Tensor& t) { return oracle_logits(task, t, 3); }, 200);
  EXPECT_EQ(last_wrong.accuracy, 0.0);
  EXPECT_NEAR(last_wrong.token_accuracy, 3.0 / 5.0, 1e-12);
  // A constant model (always '0', never the end token) is at or below chance.
  EvalResult constant = task.evaluate(
      [&](const Tensor& t) {
        return zeros({t.size(0), t.size(1), task.vocab_size()});
      },
      500);
  EXPECT_EQ(constant.accuracy, 0.0);
  EXPECT_LT(constant.token_accuracy, 0.3);
  EXPECT_LT(constant.accuracy, 10 * constant.chance + 1e-12);
  expect_error(
      [&] {
        task.evaluate([](const Tensor& t) { return zeros({t.size(0), t.size(1), 5}); }, 10);
      },
      {"logits_fn must return"});
  expect_error(
      [&] {
        task.evaluate([](const Tensor& t) { return zeros({t.size(0), 14}); }, 10);
      },
      {"logits_fn must return"});
}

// ---------------------------------------------------------------- token files

class TokenFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("strata_test_data_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  static std::vector<unsigned char> read_bytes(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::vector<unsigned char>(std::istreambuf_iterator<char>(in), {});
  }
  static void write_bytes(const std::string& p, const std::vector<unsigned char>& bytes) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  static uint64_t le(const std::vector<unsigned char>& b, size_t at, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | b[at + static_cast<size_t>(i)];
    return v;
  }
  fs::path dir_;
};

TEST_F(TokenFileTest, RoundTripBothWidths) {
  for (int width : {2, 4}) {
    const int64_t vocab = width == 2 ? 65536 : 4294967296LL;
    Generator gen(11);
    std::vector<int64_t> tokens(1000);
    for (auto& t : tokens) t = static_cast<int64_t>(gen.random_u64() % static_cast<uint64_t>(vocab));
    tokens[3] = vocab - 1;  // the largest id survives
    tokens[4] = 0;
    const std::string p = path("corpus" + std::to_string(width) + ".bin");
    write_token_file(p, tokens, width, vocab);

    // The bytes on disk are the documented layout.
    std::vector<unsigned char> bytes = read_bytes(p);
    ASSERT_EQ(bytes.size(), 64u + 1000u * static_cast<size_t>(width));
    EXPECT_EQ(std::string(bytes.begin(), bytes.begin() + 8), "STRTOK01");
    EXPECT_EQ(le(bytes, 8, 4), 1u);
    EXPECT_EQ(le(bytes, 12, 4), static_cast<uint64_t>(width));
    EXPECT_EQ(le(bytes, 16, 8), 1000u);
    EXPECT_EQ(le(bytes, 24, 8), static_cast<uint64_t>(vocab));
    for (size_t i = 32; i < 64; ++i) EXPECT_EQ(bytes[i], 0) << i;
    EXPECT_EQ(le(bytes, 64 + 3 * static_cast<size_t>(width), width), static_cast<uint64_t>(vocab - 1));

    TokenFile file = TokenFile::open(p);
    EXPECT_EQ(file.token_count(), 1000);
    EXPECT_EQ(file.vocab_size(), vocab);
    EXPECT_EQ(file.token_bytes(), width);
    EXPECT_EQ(file.tokens(0, 1000), tokens);
    EXPECT_EQ(file.token(999), tokens[999]);
    EXPECT_NO_THROW(file.validate());

    std::vector<int64_t> offsets = {0, 990, 17};
    Batch batch = file.batch(offsets, 9);
    ASSERT_EQ(batch.inputs.shape(), Shape({3, 9}));
    for (int64_t r = 0; r < 3; ++r) {
      const auto o = static_cast<size_t>(offsets[static_cast<size_t>(r)]);
      EXPECT_EQ(row(batch.inputs, r), std::vector<int64_t>(tokens.begin() + o, tokens.begin() + o + 9));
      EXPECT_EQ(row(batch.targets, r), std::vector<int64_t>(tokens.begin() + o + 1, tokens.begin() + o + 10));
    }
    EXPECT_EQ(file.num_windows(9), 111);  // 111 * 9 + 1 = 1000
    Batch windows = file.window_batch(std::vector<int64_t>{110}, 9);
    EXPECT_EQ(row(windows.targets, 0).back(), tokens[999]);

    TokenFile moved = std::move(file);  // the mapping moves with it
    EXPECT_EQ(moved.token(3), vocab - 1);
  }
  // Only the two token files are left: no temporaries.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 2);
}

TEST_F(TokenFileTest, EmptyFileIsValid) {
  write_token_file(path("empty.bin"), Tokens{}, 2, 10);
  TokenFile f = TokenFile::open(path("empty.bin"));
  EXPECT_EQ(f.token_count(), 0);
  EXPECT_EQ(f.num_windows(4), 0);
  EXPECT_NO_THROW(f.validate());
  expect_error([&] { f.batch(std::vector<int64_t>{0}, 1); }, {"empty.bin", "the file has 0 tokens"});
}

TEST_F(TokenFileTest, OpenRejectsBadFiles) {
  std::vector<int64_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::string good = path("good.bin");
  write_token_file(good, tokens, 2, 10);
  const std::vector<unsigned char> bytes = read_bytes(good);
  auto variant = [&](const std::string& name, auto&& edit) {
    std::vector<unsigned char> b = bytes;
    edit(b);
    write_bytes(path(name), b);
    return path(name);
  };

  expect_error([&] { TokenFile::open(path("missing.bin")); }, {"missing.bin", "cannot open"});
  expect_error([&] { TokenFile::open(dir_.string()); }, {"not a regular file"});
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  expect_error([&] { TokenFile::open(path("fifo")); }, {"fifo", "not a regular file"});  // and no hang
  std::string short_file = variant("short.bin", [](auto& b) { b.resize(10); });
  expect_error([&] { TokenFile::open(short_file); }, {"short.bin", "too short for the 64-byte header"});
  // A broken magic is an unknown format, except under a *.bin name of even size: raw uint16
  // tokens (nanoGPT's), which have no magic (tests/unit/data/test_token_formats.cpp).
  std::string magic = variant("magic.tokens", [](auto& b) { b[0] = 'X'; });
  expect_error([&] { TokenFile::open(magic); }, {"magic.tokens", "unknown format", "58 54 52 54 4f 4b 30 31"});
  EXPECT_EQ(TokenFile::open(variant("magic.bin", [](auto& b) { b[0] = 'X'; })).format(), TokenFormat::RawUint16);
  std::string version = variant("version.bin", [](auto& b) { b[8] = 2; });
  expect_error([&] { TokenFile::open(version); }, {"version.bin", "unsupported version 2", "'version'"});
  std::string width = variant("width.bin", [](auto& b) { b[12] = 3; });
  expect_error([&] { TokenFile::open(width); }, {"width.bin", "unsupported token_bytes 3", "'token_bytes'"});
  std::string vocab0 = variant("vocab0.bin", [](auto& b) { std::fill(b.begin() + 24, b.begin() + 32, 0); });
  expect_error([&] { TokenFile::open(vocab0); }, {"vocab0.bin", "vocab_size 0"});
  std::string vocab_big = variant("vocabbig.bin", [](auto& b) { b[26] = 2; });  // 131072 + 10 > 2^16
  expect_error([&] { TokenFile::open(vocab_big); }, {"vocabbig.bin", "'vocab_size'"});
  std::string reserved = variant("reserved.bin", [](auto& b) { b[40] = 1; });
  expect_error([&] { TokenFile::open(reserved); }, {"reserved.bin", "reserved header byte at offset 40"});
  std::string truncated = variant("truncated.bin", [](auto& b) { b.pop_back(); });
  expect_error([&] { TokenFile::open(truncated); }, {"truncated.bin", "token_count 9", "(truncated)"});
  std::string trailing = variant("trailing.bin", [](auto& b) { b.push_back(0); });
  expect_error([&] { TokenFile::open(trailing); }, {"trailing.bin", "(trailing bytes)"});
  std::string huge = variant("huge.bin", [](auto& b) { b[23] = 0xff; });
  expect_error([&] { TokenFile::open(huge); }, {"huge.bin", "token_count"});

  // A token >= vocab_size passes open (no scan) but not validate() nor a batch over it.
  std::string bad_token = variant("badtoken.bin", [](auto& b) { b[64 + 2 * 5] = 200; });
  TokenFile f = TokenFile::open(bad_token);
  expect_error([&] { f.validate(); }, {"badtoken.bin", "token 5 is 200", "vocab_size 10"});
  expect_error([&] { f.batch(std::vector<int64_t>{2}, 4); }, {"badtoken.bin", "token 5 is 200"});
  EXPECT_NO_THROW(f.batch(std::vector<int64_t>{0}, 4));  // tokens 0..4 are fine
}

TEST_F(TokenFileTest, WindowsMustFitInTheFile) {
  write_token_file(path("nine.bin"), Tokens{1, 2, 3, 4, 5, 6, 7, 8, 9}, 4, 10);
  TokenFile f = TokenFile::open(path("nine.bin"));
  EXPECT_NO_THROW(f.batch(std::vector<int64_t>{0}, 8));  // needs all 9 tokens
  expect_error([&] { f.batch(std::vector<int64_t>{0}, 9); }, {"nine.bin", "sequence of 9 tokens", "has 9 tokens"});
  expect_error([&] { f.batch(std::vector<int64_t>{0, 2}, 7); }, {"offset 2", "row 1"});
  expect_error([&] { f.batch(std::vector<int64_t>{-1}, 2); }, {"offset -1"});
  expect_error([&] { f.batch(std::vector<int64_t>{0}, 0); }, {"seq_len must be positive"});
  EXPECT_EQ(f.num_windows(4), 2);
  expect_error([&] { f.window_batch(std::vector<int64_t>{2}, 4); }, {"window 2", "2 windows"});
  expect_error([&] { f.token(9); }, {"token index 9"});
  expect_error([&] { f.tokens(5, 5); }, {"outside the file's 9 tokens"});
}

TEST_F(TokenFileTest, WriterRejectsBadInputAndLeavesTheOldFile) {
  const std::string p = path("corpus.bin");
  write_token_file(p, Tokens{1, 2, 3}, 2, 4);
  expect_error([&] { write_token_file(p, Tokens{1, 2}, 3, 4); }, {"corpus.bin", "token_bytes must be 2 or 4"});
  expect_error([&] { write_token_file(p, Tokens{1, 2}, 2, 70000); }, {"corpus.bin", "vocab_size 70000"});
  expect_error([&] { write_token_file(p, Tokens{1, 2}, 2, 0); }, {"vocab_size 0"});
  expect_error([&] { write_token_file(p, Tokens{1, 4}, 2, 4); }, {"corpus.bin", "token 1 is 4"});
  expect_error([&] { write_token_file(p, Tokens{-1}, 4, 4); }, {"token 0 is -1"});
  expect_error([&] { write_token_file(path("no/such/dir/x.bin"), Tokens{1}, 2, 4); },
               {"x.bin", "No such file or directory"});
  EXPECT_EQ(TokenFile::open(p).tokens(0, 3), (std::vector<int64_t>{1, 2, 3}));
  // Overwriting replaces the file as a whole.
  write_token_file(p, Tokens{3, 2}, 4, 5);
  TokenFile f = TokenFile::open(p);
  EXPECT_EQ(f.token_bytes(), 4);
  EXPECT_EQ(f.tokens(0, 2), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

// ---------------------------------------------------------------- sampler

TEST(BatchSampler, PermutationIsABijectionKeyedBySeedAndEpoch) {
  for (int64_t n : {1, 2, 3, 7, 16, 17, 1000, 4099}) {
    std::vector<int64_t> perm(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) perm[static_cast<size_t>(i)] = permute_index(i, n, 42, 3);
    std::vector<int64_t> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(sorted[static_cast<size_t>(i)], i) << "n=" << n;
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(permute_index(i, n, 42, 3), perm[static_cast<size_t>(i)]);
    if (n >= 1000) {
      int same_epoch = 0, same_seed = 0, fixed = 0;
      for (int64_t i = 0; i < n; ++i) {
        same_epoch += permute_index(i, n, 42, 4) == perm[static_cast<size_t>(i)];
        same_seed += permute_index(i, n, 43, 3) == perm[static_cast<size_t>(i)];
        fixed += perm[static_cast<size_t>(i)] == i;
      }
      EXPECT_LT(same_epoch, 20);
      EXPECT_LT(same_seed, 20);
      EXPECT_LT(fixed, 20);
    }
  }
  // Large n needs no memory; values stay in range.
  const int64_t big = (1LL << 40) + 12345;
  for (int64_t i = 0; i < 100; ++i) {
    int64_t v = permute_index(big - 1 - i, big, 1, 0);
    EXPECT_GE(v, 0);
    EXPECT_LT(v, big);
  }
  expect_error([] { permute_index(5, 5, 0, 0); }, {"outside [0, 5)"});
}

TEST(BatchSampler, RanksSplitTheSingleRankGlobalBatch) {
  const int64_t N = 103;
  for (int world = 1; world <= 4; ++world) {
    for (int64_t B : {1, 3, 8}) {
      BatchSampler single({.dataset_size = N, .batch_size = B * world, .seed = 9});
      std::vector<BatchSampler> ranks;
      for (int r = 0; r < world; ++r)
        ranks.emplace_back(
            SamplerOptions{.dataset_size = N, .batch_size = B, .seed = 9, .rank = r, .world_size = world});
      const int64_t steps = single.steps_per_epoch();
      EXPECT_EQ(steps, N / (B * world));
      for (auto& s : ranks) EXPECT_EQ(s.steps_per_epoch(), steps);
      for (int64_t epoch = 0; epoch < 3; ++epoch) {
        std::set<int64_t> seen;
        for (int64_t step = 0; step < steps; ++step) {
          std::vector<int64_t> global = single.next(), joined;
          for (auto& s : ranks) {
            std::vector<int64_t> mine = s.next();
            ASSERT_EQ(static_cast<int64_t>(mine.size()), B);
            joined.insert(joined.end(), mine.begin(), mine.end());
          }
          ASSERT_EQ(joined, global) << "world " << world << " B " << B << " epoch " << epoch << " step " << step;
          for (int64_t i : global) {
            EXPECT_TRUE(i >= 0 && i < N);
            EXPECT_TRUE(seen.insert(i).second) << "index " << i << " twice in epoch " << epoch;
          }
        }
        EXPECT_EQ(static_cast<int64_t>(seen.size()), steps * B * world);
        EXPECT_EQ(single.state(), (SamplerState{epoch + 1, 0}));
      }
    }
  }
}

TEST(BatchSampler, EpochsAreShuffledDifferentlyAndUnshuffledIsInOrder) {
  BatchSampler s({.dataset_size = 64, .batch_size = 64, .seed = 1});
  std::vector<int64_t> e0 = s.next(), e1 = s.next();
  EXPECT_NE(e0, e1);
  std::vector<int64_t> identity(64);
  for (int64_t i = 0; i < 64; ++i) identity[static_cast<size_t>(i)] = i;
  EXPECT_NE(e0, identity);
  std::sort(e0.begin(), e0.end());
  EXPECT_EQ(e0, identity);
  BatchSampler plain({.dataset_size = 10, .batch_size = 2, .shuffle = false, .rank = 1, .world_size = 2});
  EXPECT_EQ(plain.next(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(plain.next(), (std::vector<int64_t>{6, 7}));
  EXPECT_EQ(plain.next(), (std::vector<int64_t>{2, 3}));  // 10 / 4 = 2 steps per epoch
  BatchSampler other_seed({.dataset_size = 64, .batch_size = 64, .seed = 2});
  EXPECT_NE(other_seed.next(), BatchSampler({.dataset_size = 64, .batch_size = 64, .seed = 1}).next());
}

TEST(BatchSampler, ResumedRunContinuesWithTheSameBatches) {
  const SamplerOptions opts{.dataset_size = 50, .batch_size = 4, .seed = 5, .rank = 1, .world_size = 2};
  BatchSampler run(opts);
  for (int i = 0; i < 9; ++i) run.next();  // 6 steps per epoch: now in epoch 1
  SamplerState saved = run.state();
  EXPECT_EQ(saved, (SamplerState{1, 3}));
  StateDict dict = run.state_dict();
  std::vector<std::vector<int64_t>> expected;
  for (int i = 0; i < 20; ++i) expected.push_back(run.next());

  BatchSampler resumed(opts);
  resumed.set_state(saved);
  BatchSampler from_dict(opts);
  from_dict.load_state_dict(dict);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(resumed.next(), expected[static_cast<size_t>(i)]) << i;
    EXPECT_EQ(from_dict.next(), expected[static_cast<size_t>(i)]) << i;
  }
  // Resuming at another world size with the same global batch gives the same global batches.
  BatchSampler four_ranks({.dataset_size = 50, .batch_size = 2, .seed = 5, .rank = 0, .world_size = 4});
  four_ranks.load_state_dict(dict);
  EXPECT_EQ(four_ranks.global_indices_at(four_ranks.state()), run.global_indices_at(saved));

  expect_error([&] { resumed.set_state({0, 6}); }, {"step 6", "[0, 6)"});
  expect_error([&] { resumed.set_state({-1, 0}); }, {"epoch -1"});
  BatchSampler other_seed({.dataset_size = 50, .batch_size = 4, .seed = 6, .rank = 1, .world_size = 2});
  expect_error([&] { other_seed.load_state_dict(dict); }, {"'seed' is 5", "6 here"});
  BatchSampler other_batch({.dataset_size = 50, .batch_size = 2, .seed = 5, .rank = 1, .world_size = 2});
  expect_error([&] { other_batch.load_state_dict(dict); }, {"'global_batch_size' is 8"});
  StateDict partial = dict;
  partial.erase("step");
  expect_error([&] { resumed.load_state_dict(partial); }, {"missing field 'step'"});
}

TEST(BatchSampler, OptionsAreChecked) {
  expect_error([] { BatchSampler({.dataset_size = 10, .batch_size = 2, .rank = 2, .world_size = 2}); }, {"rank 2"});
  expect_error([] { BatchSampler({.dataset_size = 10, .batch_size = 0}); }, {"batch_size"});
  expect_error([] { BatchSampler({.dataset_size = 0, .batch_size = 1}); }, {"dataset_size"});
  expect_error([] { BatchSampler({.dataset_size = 10, .batch_size = 3, .world_size = 4}); }, {"does not fit"});
  EXPECT_NO_THROW(BatchSampler({.dataset_size = 12, .batch_size = 3, .world_size = 4}));
}

TEST(Data, SyntheticTaskThroughTheSampler) {
  // The intended use: a sampler over a virtual train set drives make_batch.
  SyntheticTask task({.digits = 2, .seed = 4});
  BatchSampler sampler({.dataset_size = 1 << 20, .batch_size = 16, .seed = 4});
  Batch b = task.make_batch(sampler.next());
  EXPECT_EQ(b.inputs.shape(), Shape({16, task.sequence_length()}));
}
