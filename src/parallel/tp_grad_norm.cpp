#include "strata/parallel/tp_grad_norm.h"

#include <cmath>
#include <memory>
#include <set>

#include "strata/optim/grad_clip.h"
#include "strata/parallel/tp_layers.h"
#include "strata/tensor/factory.h"

namespace strata::parallel {
namespace {

// The sum of v over the group, made on the group's own device (NCCL takes CUDA tensors only).
double group_sum(dist::ProcessGroup& group, double v) {
  Tensor t = full({1}, v, {.dtype = DType::Float64, .device = group.tensor_device()});
  group.all_reduce(t)->wait();
  return t.item();
}

}  // namespace

double grad_norm(nn::Module& model, const ModelParallelGroups& groups) {
  std::function<bool(const std::string&)> is_split = [](const std::string&) { return false; };
  if (groups.tensor != nullptr) is_split = split_parameter_predicate(model);
  std::vector<Tensor> split, replicated;
  for (auto& [name, p] : model.named_parameters()) {
    if (groups.duplicate && groups.duplicate(name)) continue;
    (is_split(name) ? split : replicated).push_back(p);
  }
  double split_sum = optim::grad_norm_squared(split);
  if (groups.tensor != nullptr && groups.tensor->size() > 1) split_sum = group_sum(*groups.tensor, split_sum);
  double total = split_sum + optim::grad_norm_squared(replicated);
  if (groups.pipeline != nullptr && groups.pipeline->size() > 1) total = group_sum(*groups.pipeline, total);
  return std::sqrt(total);
}

double clip_grad_norm(nn::Module& model, double max_norm, const ModelParallelGroups& groups,
                      const optim::ClipOptions& options) {
  STRATA_CHECK(std::isfinite(max_norm) && max_norm > 0, "clip_grad_norm: max_norm ", max_norm,
               " must be finite and > 0");
  const double norm = grad_norm(model, groups);
  optim::check_total_norm(norm, options, "parallel::clip_grad_norm");
  if (!std::isfinite(norm)) return norm;
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0) optim::scale_grads(model.parameters(), coef);
  return norm;
}

double tp_grad_norm(nn::Module& model, dist::ProcessGroup& tp) { return grad_norm(model, {.tensor = &tp}); }

double tp_clip_grad_norm(nn::Module& model, double max_norm, dist::ProcessGroup& tp,
                         const optim::ClipOptions& options) {
  return clip_grad_norm(model, max_norm, {.tensor = &tp}, options);
}

std::function<bool(const std::string&)> split_parameter_predicate(nn::Module& model) {
  auto names = std::make_shared<const std::set<std::string>>(split_parameter_names(model));
  return [names](const std::string& name) { return names->count(name) != 0; };
}

}  // namespace strata::parallel
