#pragma once
// Shared by the DDP tests: a tiny GPT, deterministic global batches, and a comparison of a
// DDP run (per-rank batch B) against a single-process run on the whole global batch N*B,
// which every rank computes itself.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "dist_test_util.h"
#include "strata/strata.h"
#include "strata/parallel/ddp.h"

namespace strata::test {

inline nn::GPTConfig tiny_gpt(DType dtype) {
  return {.vocab_size = 14, .context = 8, .n_layer = 2, .n_head = 2, .n_embd = 32, .dropout = 0.0, .seed = 7,
          .dtype = dtype};
}

// Global batch `step` (tokens, targets), [global_batch, T], identical on every rank.
inline Batch global_batch(int64_t step, int64_t global_batch_size, const nn::GPTConfig& c) {
  Generator gen(1234, static_cast<uint64_t>(step) * 1000003);
  Tensor tokens = randint(0, c.vocab_size, {global_batch_size, c.context}, {.dtype = DType::Int64}, &gen);
  Tensor targets = randint(0, c.vocab_size, {global_batch_size, c.context}, {.dtype = DType::Int64}, &gen);
  return {tokens, targets};
}

inline Batch rank_slice(const Batch& b, int rank, int64_t per_rank) {
  return {b.inputs.narrow(0, rank * per_rank, per_rank).contiguous(),
          b.targets.narrow(0, rank * per_rank, per_rank).contiguous()};
}

inline optim::AdamWOptions adamw() { return {.lr = 1e-2, .weight_decay = 0.1}; }
inline optim::SGDOptions sgd() { return {.lr = 0.5, .momentum = 0.9, .weight_decay = 0.01}; }

// The optimizer of an equivalence run. SGD keeps the update proportional to the gradient, so
// float32 rounding stays at rounding size; AdamW divides by sqrt(v), which turns rounding
// noise in (near-)zero gradient entries into full steps of either sign.
enum class Opt { AdamW, SGD };
inline std::unique_ptr<optim::Optimizer> make_optimizer(Opt which, const nn::Module& model) {
  if (which == Opt::SGD) return std::make_unique<optim::SGD>(model.parameters(), sgd());
  return std::make_unique<optim::AdamW>(model.parameters(), adamw());
}

// The largest relative difference ||a - b|| / ||b|| (L2, per parameter tensor) over all
// parameters (names match). Per tensor rather than per element: AdamW divides by sqrt(v), so
// an element whose gradient is ~0 turns rounding noise into a step of ~lr in either direction.
inline double max_relative_difference(const nn::Module& a, const nn::Module& b, bool* bitwise = nullptr) {
  auto pa = a.named_parameters();
  auto pb = b.named_parameters();
  EXPECT_EQ(pa.size(), pb.size());
  double worst = 0;
  bool same = true;
  double num = 0, den = 0;
  for (size_t i = 0; i < pa.size() && i < pb.size(); ++i) {
    EXPECT_EQ(pa[i].first, pb[i].first);
    auto x = pa[i].second.to_vector<double>();
    auto y = pb[i].second.to_vector<double>();
    num = den = 0;
    for (size_t k = 0; k < x.size(); ++k) {
      same = same && x[k] == y[k];
      num += (x[k] - y[k]) * (x[k] - y[k]);
      den += y[k] * y[k];
    }
    worst = std::max(worst, std::sqrt(num / std::max(den, 1e-300)));
  }
  if (bitwise) *bitwise = same;
  return worst;
}

// Reference: one process, one backward per step on the whole global batch of `global` rows.
inline void train_reference(nn::GPT& model, int steps, int64_t global, Opt which = Opt::AdamW) {
  auto opt = make_optimizer(which, model);
  for (int s = 0; s < steps; ++s) {
    Batch b = global_batch(s, global, model.config());
    model.loss(b.inputs, b.targets).backward();
    opt->step();
    opt->zero_grad();
  }
}

}  // namespace strata::test
