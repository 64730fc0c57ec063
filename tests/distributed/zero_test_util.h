#pragma once
// Shared by the ZeRO tests: train the tiny GPT of the DDP tests with a ZeroOptimizer and
// return the full parameters, so that stages can be compared with each other.
#include <cmath>
#include <vector>

#include "ddp_test_util.h"
#include "strata/parallel/zero.h"

namespace strata::test {
using namespace strata::parallel;
using namespace strata::data;

inline constexpr int kZeroSteps = 5;
inline constexpr int64_t kZeroPerRank = 2;

// Small buckets so that the tiny GPT (~26k parameters) spreads over several of them.
inline ZeroOptions zero_options(int stage) {
  ZeroOptions o;
  o.stage = stage;
  o.bucket_cap_bytes = 8 << 10;
  return o;
}

struct ZeroRun {
  StateDict params;
  std::vector<double> norms;  // clip_grad_norm's result per step (empty without clipping)
};

inline ZeroRun train_zero(int stage, DType dtype, const InnerOptimizer& inner, double clip, int steps = kZeroSteps) {
  auto& world = dist::world();
  nn::GPT model(tiny_gpt(dtype));
  ZeroOptimizer zero(model, inner, world, zero_options(stage));
  ZeroRun run;
  for (int s = 0; s < steps; ++s) {
    Batch mine = rank_slice(global_batch(s, world.size() * kZeroPerRank, model.config()), world.rank(), kZeroPerRank);
    model.loss(mine.inputs, mine.targets).backward();
    if (clip > 0) run.norms.push_back(zero.clip_grad_norm(clip));
    zero.step();
    zero.zero_grad();
  }
  run.params = zero.full_parameters();
  return run;
}

// The largest per-tensor relative L2 difference ||a - b|| / ||b||; `bitwise` tells whether
// every element is equal.
inline double max_relative_difference(const StateDict& a, const StateDict& b, bool* bitwise = nullptr) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  bool same = true;
  for (const auto& [name, tb] : b) {
    auto it = a.find(name);
    EXPECT_NE(it, a.end()) << name;
    if (it == a.end()) continue;
    auto x = it->second.to_vector<double>();
    auto y = tb.to_vector<double>();
    worst = std::max(worst, relative_l2(x, y, same));
  }
  if (bitwise) *bitwise = same;
  return worst;
}

}  // namespace strata::test
