#pragma once
// Shared by the MoE distributed tests (expert parallelism, global-batch load balancing): an
// nn::MoE with 8 experts, top-2, a router biased so that each rank's tokens prefer a few
// experts, each rank's batch, and one process trained 5 AdamW steps on the ranks' batches
// concatenated in rank order.
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strata/autograd/grad_mode.h"
#include "strata/nn/moe.h"
#include "strata/ops.h"
#include "strata/optim/adam.h"
#include "strata/optim/grad_clip.h"
#include "strata/tensor/factory.h"

namespace strata::test::moe {

inline constexpr int64_t kExperts = 8, kTopK = 2, kHidden = 8, kInter = 6, kTokens = 6, kSteps = 5;

inline nn::MoEConfig base_config(std::optional<double> capacity_factor, double aux_loss_coef = 0.0) {
  return {.hidden_size = kHidden,
          .intermediate_size = kInter,
          .num_experts = kExperts,
          .top_k = kTopK,
          .capacity_factor = capacity_factor,
          .aux_loss_coef = aux_loss_coef,
          .z_loss_coef = 0.05};
}

// Parameters drawn by name (so a shard holds exactly the full layer's values), then a router
// whose expert e reads mostly input dimension e: a token's large dimensions pick its experts.
inline std::shared_ptr<nn::MoE> build(const nn::MoEConfig& config, DType dtype = DType::Float64) {
  auto moe = std::make_shared<nn::MoE>(config, nn::InitOptions{.std = 0.3, .dtype = dtype, .by_name = true});
  moe->init_parameters(7);
  NoGradGuard no_grad;
  std::vector<double> w = moe->gate->weight.to_vector<double>();
  for (int64_t e = 0; e < kExperts; ++e) w[static_cast<size_t>(e * kHidden + e)] += 3.0;
  moe->gate->weight.copy_(from_vector(w, {kExperts, kHidden}).to(dtype));
  return moe;
}

// Rank r's tokens at step t: small distinct values plus 2 large ones among the experts
// (2r + t) + {0, 1, 3} mod 8, so each rank leaves most experts idle.
inline Tensor tokens(int r, int64_t t) {
  std::vector<double> v;
  const int64_t hot[3] = {(2 * r + t) % kExperts, (2 * r + t + 1) % kExperts, (2 * r + t + 3) % kExperts};
  for (int64_t n = 0; n < kTokens; ++n)
    for (int64_t c = 0; c < kHidden; ++c) {
      double x = 0.1 * std::sin(1.0 + static_cast<double>(37 * r + 11 * t + 5 * n + c));
      if (c == hot[n % 3] || c == hot[(n + 1) % 3]) x += 1.5 + 0.1 * static_cast<double>(n % 2 + c % 3);
      v.push_back(x);
    }
  return from_vector(v, {kTokens, kHidden});
}

inline Tensor targets(int r, int64_t t) { return mul(tanh(tokens(r, t)), 0.5); }

// Each rank's loss: the mean over its tokens, plus the router's auxiliary losses (the z-loss
// a mean over tokens; the load-balancing loss one too, given f_e over the whole batch), so
// that the mean of the ranks' losses is one process's loss on the whole batch.
inline Tensor loss_of(nn::MoE& moe, const Tensor& x, const Tensor& target) {
  Tensor d = sub(moe.forward(x), target);
  Tensor loss = mean(mul(d, d));
  Tensor aux = moe.auxiliary_loss();
  return aux.defined() ? add(loss, aux) : loss;
}

struct Reference {
  std::map<std::string, Tensor> params;
  std::vector<nn::MoEStats> stats;           // per step, over the whole batch
  std::vector<std::vector<int64_t>> routed;  // per step: experts chosen, [world * tokens * k]
  std::vector<double> losses;                // per step, before the update
  std::vector<double> norms;                 // per step, with clipping: the gradient norm before it
};

// One process, the world's batches concatenated in rank order, 5 AdamW steps (each with the
// gradients clipped to norm `clip` when it is set).
inline Reference train_reference(const nn::MoEConfig& config, int world, DType dtype = DType::Float64,
                                 std::optional<double> clip = std::nullopt) {
  auto moe = build(config, dtype);
  std::vector<Tensor> params;
  for (auto& [name, p] : moe->named_parameters()) params.push_back(p);
  optim::AdamW opt(params, {.lr = 0.01});
  Reference ref;
  for (int64_t t = 0; t < kSteps; ++t) {
    std::vector<Tensor> xs, ys;
    for (int r = 0; r < world; ++r) {
      xs.push_back(tokens(r, t).to(dtype));
      ys.push_back(targets(r, t).to(dtype));
    }
    opt.zero_grad();
    Tensor x = cat(xs, 0);
    ref.routed.push_back(moe->route(x).experts.to_vector<int64_t>());
    Tensor loss = loss_of(*moe, x, cat(ys, 0));
    ref.losses.push_back(loss.to(DType::Float64).item());
    loss.backward();
    ref.stats.push_back(moe->stats());
    if (clip) ref.norms.push_back(optim::clip_grad_norm(params, *clip));
    opt.step();
  }
  for (auto& [name, p] : moe->named_parameters()) ref.params[name] = p.detach().clone();
  return ref;
}

inline double relative_difference(const Tensor& a, const Tensor& b) {
  const double diff = std::sqrt(sum(mul(sub(a, b), sub(a, b))).item());
  const double norm = std::sqrt(sum(mul(b, b)).item());
  return norm > 0.0 ? diff / norm : diff;
}

}  // namespace strata::test::moe
