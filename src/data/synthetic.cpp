#include "strata/data/synthetic.h"

#include <algorithm>
#include <cmath>

#include "strata/autograd/grad_mode.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/common/philox.h"

namespace strata::data {
namespace {

// Key of the hash that decides which problems are held out. Fixed (not the seed), so
// every run, whatever its seed, evaluates on problems none of them trained on.
constexpr uint64_t kSplitKey = 0x5354524154415350ull;  // "STRATASP"
// Draws per sample before giving up; reached only if a side of the split were empty,
// which the constructor rules out (expected draws are at most 1/1e-4).
constexpr uint64_t kMaxDraws = 100'000'000;

uint64_t pow10(int n) {
  uint64_t r = 1;
  for (int i = 0; i < n; ++i) r *= 10;
  return r;
}

uint64_t join(uint32_t hi, uint32_t lo) { return (static_cast<uint64_t>(hi) << 32) | lo; }

int64_t char_to_token(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  switch (c) {
    case '+': return SyntheticTask::kPlus;
    case '=': return SyntheticTask::kEquals;
    case '\n': return SyntheticTask::kEnd;
    case '_': return SyntheticTask::kPad;
    default: return -1;
  }
}

}  // namespace

SyntheticTask::SyntheticTask(SyntheticOptions options) : options_(options) {
  STRATA_CHECK(options_.digits >= 1 && options_.digits <= 18, "SyntheticTask: digits must be in [1, 18], got ",
               options_.digits);
  STRATA_CHECK(options_.eval_fraction >= 1e-4 && options_.eval_fraction <= 0.5,
               "SyntheticTask: eval_fraction must be in [1e-4, 0.5], got ", options_.eval_fraction);
  modulus_ = pow10(options_.digits);
  eval_threshold_ = static_cast<uint32_t>(std::llround(options_.eval_fraction * 4294967296.0));
  // With few possible problems a side of the split could be empty, and sampling from it
  // would never end: count them exactly. (From 3 digits on there are 10^6 or more problems,
  // so at eval_fraction >= 1e-4 both sides hold ~100 or more.)
  if (options_.digits <= 2) {
    uint64_t eval = 0;
    for (uint64_t a = 0; a < modulus_; ++a)
      for (uint64_t b = 0; b < modulus_; ++b) eval += is_eval_problem(a, b) ? 1 : 0;
    uint64_t total = modulus_ * modulus_;
    STRATA_CHECK(eval > 0 && eval < total, "SyntheticTask: with digits=", options_.digits,
                 " and eval_fraction=", options_.eval_fraction, " the eval split holds ", eval, " of ", total,
                 " problems; choose an eval_fraction that leaves both splits non-empty");
  }
}

bool SyntheticTask::is_eval_problem(uint64_t a, uint64_t b) const {
  return strata_kernels::philox4x32_10(a, b, kSplitKey).v[0] < eval_threshold_;
}

Example SyntheticTask::make_example(uint64_t a, uint64_t b) const {
  STRATA_CHECK(a < modulus_ && b < modulus_, "SyntheticTask::make_example: operands ", a, " and ", b,
               " must be below 10^", options_.digits);
  const int d = options_.digits;
  Example ex;
  ex.a = a;
  ex.b = b;
  ex.prompt_length = prompt_length();
  ex.tokens.resize(static_cast<size_t>(example_length()));
  auto put_forward = [&](size_t at, uint64_t value) {  // most significant digit first
    for (int i = d - 1; i >= 0; --i, value /= 10)
      ex.tokens[at + static_cast<size_t>(i)] = static_cast<int64_t>(value % 10);
  };
  put_forward(0, a);
  ex.tokens[static_cast<size_t>(d)] = kPlus;
  put_forward(static_cast<size_t>(d) + 1, b);
  ex.tokens[static_cast<size_t>(2 * d + 1)] = kEquals;
  uint64_t sum = a + b;  // < 2 * 10^18 < 2^63
  for (int i = 0; i <= d; ++i, sum /= 10)
    ex.tokens[static_cast<size_t>(2 * d + 2 + i)] = static_cast<int64_t>(sum % 10);
  ex.tokens.back() = kEnd;
  return ex;
}

Example SyntheticTask::sample(uint64_t index, DataSplit split) const {
  const bool want_eval = split == DataSplit::Eval;
  // Uniform below modulus_ by rejection: keep x < 2^64 - (2^64 mod modulus_), a multiple of it.
  const uint64_t max_kept = UINT64_MAX - (UINT64_MAX % modulus_ + 1) % modulus_;
  const uint64_t split_bit = want_eval ? (1ull << 63) : 0;
  for (uint64_t draw = 0; draw < kMaxDraws; ++draw) {
    auto r = strata_kernels::philox4x32_10(index, split_bit | draw, options_.seed);
    uint64_t x = join(r.v[0], r.v[1]), y = join(r.v[2], r.v[3]);
    if (x > max_kept || y > max_kept) continue;
    uint64_t a = x % modulus_, b = y % modulus_;
    if (is_eval_problem(a, b) == want_eval) return make_example(a, b);
  }
  STRATA_FAIL("SyntheticTask::sample: no ", want_eval ? "eval" : "train", " problem found in ", kMaxDraws,
              " draws for index ", index);
}

std::vector<int64_t> SyntheticTask::encode(std::string_view text) const {
  std::vector<int64_t> out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    int64_t t = char_to_token(text[i]);
    STRATA_CHECK(t >= 0, "SyntheticTask::encode: character code ",
                 static_cast<int>(static_cast<unsigned char>(text[i])), " at position ", i,
                 " is not in the vocabulary (digits, '+', '=', '\\n', '_')");
    out.push_back(t);
  }
  return out;
}

std::string SyntheticTask::decode(std::span<const int64_t> tokens) const {
  static constexpr char kChars[kVocabSize + 1] = "0123456789+=\n_";
  std::string out;
  out.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    STRATA_CHECK(tokens[i] >= 0 && tokens[i] < kVocabSize, "SyntheticTask::decode: token ", tokens[i], " at position ",
                 i, " is outside [0, ", kVocabSize, ")");
    out.push_back(kChars[tokens[i]]);
  }
  return out;
}

Batch SyntheticTask::make_batch(std::span<const int64_t> indices, DataSplit split, int64_t seq_len) const {
  if (seq_len == 0) seq_len = sequence_length();
  STRATA_CHECK(seq_len >= sequence_length(), "SyntheticTask::make_batch: seq_len ", seq_len,
               " is shorter than an example needs (", sequence_length(), " for digits=", options_.digits, ")");
  STRATA_CHECK(!indices.empty(), "SyntheticTask::make_batch: no indices");
  const auto rows = static_cast<int64_t>(indices.size());
  std::vector<int64_t> inputs(static_cast<size_t>(rows * seq_len), kPad);
  std::vector<int64_t> targets(static_cast<size_t>(rows * seq_len), kIgnoreIndex);
  for (int64_t r = 0; r < rows; ++r) {
    STRATA_CHECK(indices[static_cast<size_t>(r)] >= 0, "SyntheticTask::make_batch: negative index ",
                 indices[static_cast<size_t>(r)], " in row ", r);
    Example ex = sample(static_cast<uint64_t>(indices[static_cast<size_t>(r)]), split);
    int64_t* in = inputs.data() + r * seq_len;
    int64_t* tg = targets.data() + r * seq_len;
    for (int64_t t = 0; t + 1 < example_length(); ++t) {
      in[t] = ex.tokens[static_cast<size_t>(t)];
      // Position t predicts token t+1; only answer tokens (index >= prompt_length) count.
      if (t + 1 >= ex.prompt_length) tg[t] = ex.tokens[static_cast<size_t>(t + 1)];
    }
  }
  return Batch{from_vector(inputs, {rows, seq_len}), from_vector(targets, {rows, seq_len})};
}

EvalResult SyntheticTask::evaluate(const LogitsFn& logits_fn, int64_t num_examples, int64_t batch_size) const {
  STRATA_CHECK(static_cast<bool>(logits_fn), "SyntheticTask::evaluate: logits_fn is empty");
  STRATA_CHECK(num_examples > 0 && batch_size > 0, "SyntheticTask::evaluate: num_examples (", num_examples,
               ") and batch_size (", batch_size, ") must be positive");
  NoGradGuard no_grad;
  const int64_t T = sequence_length(), P = prompt_length(), A = answer_length();
  int64_t exact = 0, right_tokens = 0;
  for (int64_t first = 0; first < num_examples; first += batch_size) {
    const int64_t n = std::min(batch_size, num_examples - first);
    std::vector<Example> examples;
    examples.reserve(static_cast<size_t>(n));
    std::vector<int64_t> tokens(static_cast<size_t>(n * T), kPad);
    for (int64_t r = 0; r < n; ++r) {
      examples.push_back(sample(static_cast<uint64_t>(first + r), DataSplit::Eval));
      std::copy_n(examples.back().tokens.begin(), P, tokens.begin() + r * T);
    }
    std::vector<char> all_right(static_cast<size_t>(n), 1);
    for (int64_t k = 0; k < A; ++k) {
      const int64_t pos = P - 1 + k;  // logits here predict answer token k (at index P + k)
      Tensor logits = logits_fn(from_vector(tokens, {n, T}));
      STRATA_CHECK(logits.defined() && logits.dim() == 3 && logits.size(0) == n && logits.size(1) == T &&
                       logits.size(2) >= kVocabSize,
                   "SyntheticTask::evaluate: logits_fn must return [", n, ", ", T, ", V >= ", kVocabSize,
                   "] logits, got ", logits.defined() ? logits.shape().str() : std::string("an undefined tensor"));
      STRATA_CHECK(is_floating(logits.dtype()), "SyntheticTask::evaluate: logits must be floating point, got ",
                   logits.dtype());
      Tensor at = logits.narrow(1, pos, 1).to(Device::cpu()).to(DType::Float32).contiguous();
      const float* p = at.data<float>();
      const int64_t V = logits.size(2);
      for (int64_t r = 0; r < n; ++r) {
        const float* row = p + r * V;
        const int64_t pred = std::max_element(row, row + V) - row;  // first maximum
        const bool ok = pred == examples[static_cast<size_t>(r)].tokens[static_cast<size_t>(P + k)];
        right_tokens += ok ? 1 : 0;
        if (!ok) all_right[static_cast<size_t>(r)] = 0;
        // Feed the guess back (an id past the vocabulary, from a padded head, goes in as kPad).
        if (pos + 1 < T) tokens[static_cast<size_t>(r * T + pos + 1)] = pred < kVocabSize ? pred : kPad;
      }
    }
    exact += std::count(all_right.begin(), all_right.end(), char{1});
  }
  EvalResult result;
  result.examples = num_examples;
  result.accuracy = static_cast<double>(exact) / static_cast<double>(num_examples);
  result.token_accuracy = static_cast<double>(right_tokens) / static_cast<double>(num_examples * A);
  result.chance = std::pow(10.0, -(options_.digits + 1));
  return result;
}

}  // namespace strata::data
