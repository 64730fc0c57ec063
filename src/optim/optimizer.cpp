#include "strata/optim/optimizer.h"

#include <cmath>
#include <set>

#include "strata/autograd/grad_mode.h"
#include "strata/tensor/factory.h"

namespace strata::optim {

Optimizer::Optimizer(std::vector<ParamGroup> groups) : Optimizer(std::move(groups), /*check_parameters=*/true) {}

Optimizer::Optimizer(std::vector<ParamGroup> groups, bool check_parameters) : groups_(std::move(groups)) {
  std::set<const TensorImpl*> seen;
  for (size_t g = 0; g < groups_.size(); ++g) {
    ParamGroup& group = groups_[g];
    STRATA_CHECK(std::isfinite(group.lr) && group.lr >= 0, "Optimizer: group ", g, " has invalid lr ", group.lr);
    STRATA_CHECK(std::isfinite(group.weight_decay) && group.weight_decay >= 0, "Optimizer: group ", g,
                 " has invalid weight_decay ", group.weight_decay);
    if (group.initial_lr == 0.0) group.initial_lr = group.lr;
    STRATA_CHECK(std::isfinite(group.initial_lr) && group.initial_lr >= 0, "Optimizer: group ", g,
                 " has invalid initial_lr ", group.initial_lr);
    for (size_t i = 0; check_parameters && i < group.params.size(); ++i) {
      const Tensor& p = group.params[i];
      STRATA_CHECK(p.defined(), "Optimizer: parameter ", i, " of group ", g, " is an undefined tensor");
      STRATA_CHECK(p.dtype() == DType::Float32 || p.dtype() == DType::Float64, "Optimizer: parameter ", i, " of group ",
                   g, " (shape ", p.shape(), ") has dtype ", p.dtype(),
                   "; optimizers update float32 or float64 parameters (for bfloat16/float16 parameters keep float32 "
                   "master weights: optim::MasterWeights in one process, or ZeroOptimizer with "
                   "ZeroOptions::master_dtype, any stage)");
      // The step is one pass over the parameter's buffer, so it must be contiguous.
      STRATA_CHECK(p.is_contiguous(), "Optimizer: parameter ", i, " of group ", g, " (shape ", p.shape(),
                   ") is not contiguous");
      STRATA_CHECK(seen.insert(p.impl()).second, "Optimizer: parameter ", i, " of group ", g, " (shape ", p.shape(),
                   ") appears more than once; it would be updated twice per step");
    }
  }
}

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (ParamGroup& group : groups_) {
    for (Tensor& p : group.params) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      if (set_to_none) {
        p.set_grad(Tensor());
      } else {
        g.zero_();
      }
    }
  }
}

void Optimizer::scale_lr(double factor) {
  STRATA_CHECK(std::isfinite(factor) && factor >= 0, "scale_lr: invalid factor ", factor);
  for (ParamGroup& group : groups_) group.lr = group.initial_lr * factor;
}

int64_t Optimizer::num_params() const {
  int64_t n = 0;
  for (const ParamGroup& group : groups_) n += static_cast<int64_t>(group.params.size());
  return n;
}

void Optimizer::check_param_count(size_t expected, const char* who) const {
  STRATA_CHECK(static_cast<size_t>(num_params()) == expected, who, ": param_groups() now hold ", num_params(),
               " parameters but the optimizer was built with ", expected,
               "; changing the parameter lists after construction is not supported");
}

void Optimizer::save_common_state(StateDict& out) const {
  out["step"] = scalar_tensor(static_cast<double>(step_count_), {.dtype = DType::Int64});
  for (size_t g = 0; g < groups_.size(); ++g)
    out["group." + std::to_string(g) + ".lr"] = scalar_tensor(groups_[g].lr, {.dtype = DType::Float64});
}

std::string param_state_key(int64_t index, const std::string& name) {
  return "state." + std::to_string(index) + "." + name;
}

}  // namespace strata::optim
