#pragma once
#include <vector>

#include "strata/optim/optimizer.h"

namespace strata::optim {

// Hyper-parameters of Lion, with the paper's defaults (Chen et al. 2023; lr typically 3-10x
// smaller than AdamW's, weight decay 3-10x larger).
struct LionOptions {
  double lr = 1e-4;
  double beta1 = 0.9;         // interpolation of the update direction
  double beta2 = 0.99;        // decay of the momentum kept as state
  double weight_decay = 0.0;  // decoupled: p *= 1 - lr * wd
};

// Lion (EvoLved Sign Momentum), per element:
//   p *= 1 - lr * wd;  p -= lr * sign(beta1 * m + (1 - beta1) * g);
//   m = beta2 * m + (1 - beta2) * g.
// State per parameter, created (zero) on its first step with a gradient:
// "state.<i>.exp_avg" (the parameter's shape and dtype). Parameters without a gradient are
// skipped. One multi-tensor pass per (device, dtype), on the CPU and on CUDA.
class Lion : public Optimizer {
 public:
  // One group with options.lr and options.weight_decay.
  Lion(std::vector<Tensor> params, LionOptions options = {});
  // Each group's own lr and weight_decay are used; the betas apply to all groups.
  Lion(std::vector<ParamGroup> groups, LionOptions options = {});

  void step() override;
  StateDict state_dict() const override;
  void load_state_dict(const StateDict& state) override;
  bool is_elementwise() const override { return true; }

  const LionOptions& options() const { return options_; }

 private:
  LionOptions options_;
  std::vector<Tensor> exp_avgs_;  // by flat index; undefined until the first gradient
};

}  // namespace strata::optim
