#pragma once
// Shared by the ZeRO tests: train the tiny GPT or Llama of the DDP tests with a ZeroOptimizer
// and return the full parameters, so that stages can be compared with each other and with
// one process.
#include <cmath>
#include <string>
#include <vector>

#include "distributed/ddp_test_util.h"
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
  std::vector<double> norms;                      // clip_grad_norm's result per step (empty without clipping)
  std::vector<std::vector<std::string>> buckets;  // parameter names per bucket (stage 3: unit)
};

// `steps` steps of `zero` over `model`, each world rank on its own slice of the global batch
// (clipping at `clip` when > 0): the norms and the final full parameters.
template <class Model>
ZeroRun run_zero_steps(Model& model, ZeroOptimizer& zero, double clip, int steps) {
  auto& world = dist::world();
  ZeroRun run;
  for (int s = 0; s < steps; ++s) {
    Batch mine = rank_slice(global_batch(s, world.size() * kZeroPerRank, model), world.rank(), kZeroPerRank);
    model.loss(mine.inputs, mine.targets).backward();
    if (clip > 0) run.norms.push_back(zero.clip_grad_norm(clip));
    zero.step();
    zero.zero_grad();
  }
  run.params = zero.full_parameters();
  return run;
}

inline ZeroRun train_zero(Family family, int stage, DType dtype, const InnerOptimizer& inner, double clip,
                          int steps = kZeroSteps) {
  auto model = tiny_model(family, dtype);
  ZeroOptions options = zero_options(stage);
  // Float64 runs test the computation itself: the default master dtype of a float64 model
  // is float64 (float32 masters would round it).
  ZeroOptimizer zero(*model, inner, dist::world(), options);
  ZeroRun run = run_zero_steps(*model, zero, clip, steps);
  run.buckets = zero.bucket_parameter_names();
  return run;
}

// The reference without ZeRO: one process trains on the whole global batch with a plain
// optimizer of the same options (SGD or AdamW) and optim::clip_grad_norm.
inline ZeroRun train_one_process(Family family, DType dtype, const InnerOptimizer& inner, double clip,
                                 int steps = kZeroSteps) {
  auto model = tiny_model(family, dtype);
  std::unique_ptr<optim::Optimizer> opt;
  if (const auto* o = std::get_if<optim::SGDOptions>(&inner))
    opt = std::make_unique<optim::SGD>(model->parameters(), *o);
  if (const auto* o = std::get_if<optim::AdamWOptions>(&inner))
    opt = std::make_unique<optim::AdamW>(model->parameters(), *o);
  EXPECT_TRUE(opt) << "train_one_process takes SGD or AdamW options";
  ZeroRun run;
  for (int s = 0; s < steps && opt; ++s) {
    Batch b = global_batch(s, dist::world().size() * kZeroPerRank, *model);
    model->loss(b.inputs, b.targets).backward();
    if (clip > 0) run.norms.push_back(optim::clip_grad_norm(model->parameters(), clip));
    opt->step();
    opt->zero_grad();
  }
  for (auto& [name, t] : model->named_parameters()) run.params[name] = t.detach().clone();
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
