#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "strata/optim/optimizer.h"

namespace strata::optim {

// Hyper-parameters of Adafactor, with the defaults of Hugging Face transformers' Adafactor
// (its lr=None is lr 0 here: with relative_step the step size is computed, not given).
struct AdafactorOptions {
  double lr = 0.0;                             // the step size when relative_step is false
  double eps1 = 1e-30;                         // added to g^2 before the second-moment averages
  double eps2 = 1e-3;                          // floor of RMS(p) in the scale_parameter step size
  double clip_threshold = 1.0;                 // the update's RMS is clipped to at most this
  double decay_rate = -0.8;                    // second-moment decay at step t: beta2_t = 1 - t^decay_rate
  std::optional<double> beta1 = std::nullopt;  // first moment of the (clipped) update; none by default
  double weight_decay = 0.0;                   // decoupled: p -= lr_t * weight_decay * p
  bool scale_parameter = true;                 // step size times max(eps2, RMS(p))
  bool relative_step = true;                   // step size min(1e-2, 1/sqrt(t)) instead of the group's lr
  bool warmup_init = false;                    // with relative_step: min(1e-6 t, 1/sqrt(t))
};

// Adafactor (Shazeer & Stern 2018), step for step as transformers.optimization.Adafactor.
// Per parameter with a gradient, t its own step count:
//   lr_t = (relative_step ? min(warmup_init ? 1e-6 t : 1e-2, 1/sqrt(t)) : lr)
//          * (scale_parameter ? max(eps2, RMS(p)) : 1)
//   u = g^2 + eps1
//   dim >= 2 (factored over the last two dims):
//     R = beta2_t R + (1 - beta2_t) mean_{-1}(u);  C = beta2_t C + (1 - beta2_t) mean_{-2}(u)
//     u = rsqrt(R / mean_{-1}(R))[..., :, None] * rsqrt(C)[..., None, :] * g
//   dim < 2:  V = beta2_t V + (1 - beta2_t) u;  u = rsqrt(V) * g
//   u = lr_t * u / max(1, RMS(u) / clip_threshold)
//   beta1: M = beta1 M + (1 - beta1) u; u = M
//   p -= lr_t * weight_decay * p;  p -= u
// State per parameter, created on its first step with a gradient: "state.<i>.step" (int64),
// "state.<i>.exp_avg_sq_row" (shape[:-1]) and "state.<i>.exp_avg_sq_col" (shape[:-2] +
// shape[-1:]) for dim >= 2, else "state.<i>.exp_avg_sq"; with beta1 "state.<i>.exp_avg".
// Not elementwise (per-tensor RMS and row/column means), so ZeRO cannot shard it.
class Adafactor : public Optimizer {
 public:
  // One group with options.lr and options.weight_decay.
  Adafactor(std::vector<Tensor> params, AdafactorOptions options = {});
  // Each group's own lr (0 with relative_step) and weight_decay are used.
  Adafactor(std::vector<ParamGroup> groups, AdafactorOptions options = {});

  void step() override;
  StateDict state_dict() const override;
  void load_state_dict(const StateDict& state) override;

  const AdafactorOptions& options() const { return options_; }

 private:
  struct ParamState {
    int64_t step = 0;                       // 0: no state yet
    Tensor exp_avg_sq_row, exp_avg_sq_col;  // factored (dim >= 2)
    Tensor exp_avg_sq;                      // dim < 2
    Tensor exp_avg;                         // with beta1
  };
  // The step size of a parameter at its step `st.step` (already counted).
  double step_size(const ParamGroup& group, const Tensor& param, int64_t step) const;
  void update(const ParamGroup& group, const Tensor& param, const Tensor& grad, ParamState& st) const;

  AdafactorOptions options_;
  std::vector<ParamState> state_;  // by flat index
};

}  // namespace strata::optim
