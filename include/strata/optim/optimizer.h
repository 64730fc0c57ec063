#pragma once
#include <string>
#include <vector>

#include "strata/tensor/state_dict.h"
#include "strata/tensor/tensor.h"

namespace strata::optim {

// A set of parameters sharing hyper-parameters. `lr` is what step() uses; schedulers set it
// from `initial_lr` (filled from lr at construction when left at 0).
struct ParamGroup {
  std::vector<Tensor> params;
  double lr = 1e-3;
  double weight_decay = 0.0;
  double initial_lr = 0.0;
};

class Optimizer {
 public:
  explicit Optimizer(std::vector<ParamGroup> groups);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Updates every parameter that has a gradient (parameters without one are skipped).
  virtual void step() = 0;
  // Zeroes gradients in place by default, so gradients that are views into a DDP bucket stay
  // views; set_to_none drops them instead.
  void zero_grad(bool set_to_none = false);

  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  // Sets every group's lr to its initial_lr times `factor` (what schedulers call).
  void scale_lr(double factor);

  // Keys: "step", per parameter "state.<flat index>.<name>" (flat index counts params across
  // groups in order), and "group.<g>.lr". load_state_dict checks names and shapes and says
  // which entry is missing or mismatched.
  virtual StateDict state_dict() const = 0;
  virtual void load_state_dict(const StateDict& state) = 0;

 protected:
  std::vector<ParamGroup> groups_;
};

}  // namespace strata::optim
