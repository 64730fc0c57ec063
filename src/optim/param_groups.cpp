#include "strata/optim/param_groups.h"

#include <set>

namespace strata::optim {

std::vector<ParamGroup> one_group(std::vector<Tensor> params, double lr, double weight_decay) {
  std::vector<ParamGroup> groups(1);
  groups[0].params = std::move(params);
  groups[0].lr = lr;
  groups[0].weight_decay = weight_decay;
  return groups;
}

std::vector<ParamGroup> weight_decay_groups(const std::vector<std::pair<std::string, Tensor>>& named_params, double lr,
                                            double weight_decay) {
  std::vector<ParamGroup> groups(2);
  groups[0].lr = groups[1].lr = lr;
  groups[0].weight_decay = weight_decay;
  groups[1].weight_decay = 0.0;
  std::set<const TensorImpl*> seen;
  for (const auto& [name, param] : named_params) {
    STRATA_CHECK(param.defined(), "weight_decay_groups: parameter \"", name, "\" is an undefined tensor");
    if (!param.requires_grad() || !seen.insert(param.impl()).second) continue;
    groups[param.dim() >= 2 ? 0 : 1].params.push_back(param);
  }
  return groups;
}

}  // namespace strata::optim
