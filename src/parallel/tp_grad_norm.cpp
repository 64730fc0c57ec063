#include "strata/parallel/tp_grad_norm.h"

#include <cmath>
#include <memory>
#include <set>

#include "strata/optim/grad_clip.h"
#include "strata/parallel/tp_layers.h"
#include "strata/tensor/factory.h"

namespace strata::parallel {

double tp_grad_norm(nn::Module& model, dist::ProcessGroup& tp) {
  const auto is_split = split_parameter_predicate(model);
  std::vector<Tensor> split, replicated;
  for (auto& [name, p] : model.named_parameters()) (is_split(name) ? split : replicated).push_back(p);
  Tensor sum = full({1}, optim::grad_norm_squared(split), {.dtype = DType::Float64});
  if (tp.size() > 1) tp.all_reduce(sum)->wait();
  return std::sqrt(sum.item() + optim::grad_norm_squared(replicated));
}

double tp_clip_grad_norm(nn::Module& model, double max_norm, dist::ProcessGroup& tp) {
  STRATA_CHECK(std::isfinite(max_norm) && max_norm > 0, "tp_clip_grad_norm: max_norm ", max_norm,
               " must be finite and > 0");
  const double norm = tp_grad_norm(model, tp);
  if (!std::isfinite(norm)) return norm;
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0) optim::scale_grads(model.parameters(), coef);
  return norm;
}

std::function<bool(const std::string&)> split_parameter_predicate(nn::Module& model) {
  auto names = std::make_shared<const std::set<std::string>>(split_parameter_names(model));
  return [names](const std::string& name) { return names->count(name) != 0; };
}

}  // namespace strata::parallel
