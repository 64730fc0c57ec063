#pragma once
#include <cstdint>
#include <vector>

#include "strata/optim/optimizer.h"

namespace strata::optim {

// Hyper-parameters of Adam, with torch.optim.Adam's defaults.
struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  // false: L2 decay added to the gradient (Adam); true: p *= 1 - lr * wd (AdamW).
  bool decoupled_weight_decay = false;
};

// AdamW's hyper-parameters, with torch.optim.AdamW's defaults (weight_decay 0.01).
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
};

// Adam (Kingma & Ba) and, with decoupled_weight_decay, AdamW (Loshchilov & Hutter), step for
// step torch.optim.Adam / torch.optim.AdamW (amsgrad and maximize are not supported):
//   Adam: g += wd * p            AdamW: p *= 1 - lr * wd
//   m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g * g
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// where t counts the steps this parameter had a gradient. State per parameter, created on
// its first step with a gradient: "state.<i>.step" (int64), "state.<i>.exp_avg",
// "state.<i>.exp_avg_sq" (the parameter's shape and dtype).
class Adam : public Optimizer {
 public:
  // One group with options.lr and options.weight_decay.
  Adam(std::vector<Tensor> params, AdamOptions options = {});
  // Each group's own lr and weight_decay are used; the other options apply to all groups.
  Adam(std::vector<ParamGroup> groups, AdamOptions options = {});

  void step() override;
  StateDict state_dict() const override;
  void load_state_dict(const StateDict& state) override;
  bool is_elementwise() const override { return true; }

  const AdamOptions& options() const { return options_; }

 private:
  struct ParamState {
    int64_t step = 0;  // 0: no state yet
    Tensor exp_avg;
    Tensor exp_avg_sq;
  };
  AdamOptions options_;
  std::vector<ParamState> state_;  // by flat index
};

// Adam with decoupled weight decay and AdamW's defaults.
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  AdamW(std::vector<ParamGroup> groups, AdamWOptions options = {});
};

}  // namespace strata::optim
