#pragma once
#include <vector>

#include "strata/optim/optimizer.h"

namespace strata::optim {

// Hyper-parameters of SGD, with torch.optim.SGD's defaults (torch requires lr; ours is 1e-3).
struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;      // needs momentum > 0 and dampening == 0, as in torch
  double weight_decay = 0.0;  // coupled L2: the gradient becomes g + weight_decay * p
};

// Stochastic gradient descent, step for step torch.optim.SGD:
//   d = g + wd * p;  buf = d on the first step, else momentum * buf + (1 - dampening) * d;
//   d = nesterov ? d + momentum * buf : buf;  p -= lr * d.
// State per parameter (momentum > 0 only): "state.<i>.momentum_buffer", created on the
// parameter's first step with a gradient.
class SGD : public Optimizer {
 public:
  // One group with options.lr and options.weight_decay.
  SGD(std::vector<Tensor> params, SGDOptions options = {});
  // Each group's own lr and weight_decay are used; the other options apply to all groups.
  SGD(std::vector<ParamGroup> groups, SGDOptions options = {});

  void step() override;
  StateDict state_dict() const override;
  void load_state_dict(const StateDict& state) override;
  bool is_elementwise() const override { return true; }

  const SGDOptions& options() const { return options_; }

 private:
  SGDOptions options_;
  std::vector<Tensor> momentum_buffers_;  // by flat index; undefined until first used
};

}  // namespace strata::optim
