#pragma once
// A built-in, seeded, download-free task for checking that training works end to end:
// addition of two fixed-width decimal numbers, the answer written least-significant digit
// first and zero-padded to digits+1 digits, then an end token. With digits = 3:
//
//     "042+917=9590\n"        (42 + 917 = 959 -> "0959" -> reversed "9590")
//
// Why this task: the answer is a deterministic function of the prompt, so exact-match
// accuracy under greedy decoding is an honest, unambiguous metric (chance is 10^-(digits+1));
// reversing the answer lets a causal model emit each digit from the two operand digits at
// that place plus the carry it can read from the digits before, so a small GPT (2 layers,
// width 128, context 12) reaches 100% on held-out 3-digit problems in about 750 steps of
// batch 64 (measured with an equivalent PyTorch model; see docs/data-format.md). Fixed width keeps every example the
// same length, so a batch has no padding and positions line up across examples.
//
// Train/eval split: a problem (a, b) is held out for evaluation iff a keyed hash of (a, b)
// falls below eval_fraction (the key is fixed, so the held-out set does not depend on the
// seed). Train examples are drawn only from the other problems, so no eval problem is ever
// trained on, whatever the seed or index. sample(index, split) draws (a, b) uniformly from
// its side of the split, deterministically in (seed, split, index), via Philox.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/data/dataset.h"
#include "strata/tensor/tensor.h"

namespace strata::data {

enum class DataSplit { Train, Eval };

struct SyntheticOptions {
  int digits = 3;               // operand width, 1..18
  uint64_t seed = 0;            // which problems are drawn (not which are held out)
  double eval_fraction = 0.01;  // share of all (a, b) problems held out, in (0, 0.5]
};

struct Example {
  uint64_t a = 0;
  uint64_t b = 0;
  std::vector<int64_t> tokens;  // prompt ("aaa+bbb="), reversed answer digits, end token
  int64_t prompt_length = 0;    // tokens up to and including '='
};

struct EvalResult {
  double accuracy = 0;        // share of examples whose greedy answer (digits + end) is exact
  double token_accuracy = 0;  // share of answer tokens right under the same greedy decoding
  double chance = 0;          // exact match when guessing each digit uniformly: 10^-(digits+1)
  int64_t examples = 0;
};

// tokens int64 [B, T] -> logits [B, T, V] (any floating dtype, V >= vocab_size()). Must be
// causal: the logits at position t may depend only on tokens[:, 0..t].
using LogitsFn = std::function<Tensor(const Tensor& tokens)>;

class SyntheticTask {
 public:
  // Token ids: '0'..'9' are 0..9, then these. Text uses '\n' for kEnd and '_' for kPad.
  static constexpr int64_t kPlus = 10;
  static constexpr int64_t kEquals = 11;
  static constexpr int64_t kEnd = 12;
  static constexpr int64_t kPad = 13;
  static constexpr int64_t kVocabSize = 14;

  explicit SyntheticTask(SyntheticOptions options = {});

  const SyntheticOptions& options() const { return options_; }
  int64_t vocab_size() const { return kVocabSize; }
  int64_t prompt_length() const { return 2 * options_.digits + 2; }
  int64_t answer_length() const { return options_.digits + 2; }  // digits+1 digits and kEnd
  int64_t example_length() const { return prompt_length() + answer_length(); }
  // The T of a batch: inputs are an example without its last token.
  int64_t sequence_length() const { return example_length() - 1; }

  // Deterministic in (seed, split, index).
  Example sample(uint64_t index, DataSplit split = DataSplit::Train) const;
  Example make_example(uint64_t a, uint64_t b) const;  // a, b < 10^digits
  bool is_eval_problem(uint64_t a, uint64_t b) const;

  std::vector<int64_t> encode(std::string_view text) const;   // throws on a character not in the vocabulary
  std::string decode(std::span<const int64_t> tokens) const;  // throws on an id outside [0, vocab_size)

  // One example per row: inputs = tokens[0..L-2], targets = tokens[1..L-1] with kIgnoreIndex
  // where the target is a prompt token, so loss and accuracy see only the answer. Rows are
  // padded with kPad (targets kIgnoreIndex) up to seq_len; 0 means sequence_length().
  Batch make_batch(std::span<const int64_t> indices, DataSplit split = DataSplit::Train, int64_t seq_len = 0) const;

  // Exact-match accuracy on eval examples 0..num_examples-1: for each prompt, decodes
  // answer_length() tokens greedily (argmax, each fed back in), calling logits_fn on
  // [batch, sequence_length()] tokens padded with kPad. Runs under NoGradGuard.
  EvalResult evaluate(const LogitsFn& logits_fn, int64_t num_examples = 1000, int64_t batch_size = 250) const;

 private:
  SyntheticOptions options_;
  uint64_t modulus_;         // 10^digits
  uint32_t eval_threshold_;  // hash < threshold: eval problem
};

}  // namespace strata::data
