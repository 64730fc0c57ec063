#include "strata/optim/lion.h"

#include <cmath>

#include "optim/multi_tensor.h"
#include "optim/state_reader.h"
#include "strata/autograd/grad_mode.h"
#include "strata/optim/param_groups.h"
#include "strata/tensor/factory.h"

namespace strata::optim {
Lion::Lion(std::vector<Tensor> params, LionOptions options)
    : Lion(one_group(std::move(params), options.lr, options.weight_decay), options) {}

Lion::Lion(std::vector<ParamGroup> groups, LionOptions options) : Optimizer(std::move(groups)), options_(options) {
  STRATA_CHECK(options_.beta1 >= 0 && options_.beta1 < 1, "Lion: invalid beta1 ", options_.beta1,
               " (needs 0 <= beta1 < 1)");
  STRATA_CHECK(options_.beta2 >= 0 && options_.beta2 < 1, "Lion: invalid beta2 ", options_.beta2,
               " (needs 0 <= beta2 < 1)");
  exp_avgs_.resize(static_cast<size_t>(num_params()));
}

void Lion::step() {
  NoGradGuard no_grad;
  check_param_count(exp_avgs_.size(), "Lion.step");
  std::vector<multi_tensor::LionTensorArgs> work;
  std::vector<std::pair<size_t, Tensor>> new_state;  // kept only once the step ran
  for_each_param([&](int64_t index, const ParamGroup& group, const Tensor& param) {
    const Tensor& grad = param.grad();
    if (!grad.defined()) return;
    Tensor exp_avg = exp_avgs_[static_cast<size_t>(index)];
    if (!exp_avg.defined()) {
      exp_avg = zeros(param.shape(), {.dtype = param.dtype(), .device = param.device()});
      new_state.emplace_back(static_cast<size_t>(index), exp_avg);
    }
    work.push_back({.param = param,
                    .exp_avg = exp_avg,
                    .grad = grad.contiguous(),
                    .lr = group.lr,
                    .weight_decay = group.weight_decay});
  });
  multi_tensor::fused_lion_step(work, {.beta1 = options_.beta1, .beta2 = options_.beta2});
  for (auto& [index, exp_avg] : new_state) exp_avgs_[index] = std::move(exp_avg);
  ++step_count_;
}

StateDict Lion::state_dict() const {
  NoGradGuard no_grad;  // the saved copies carry no autograd history
  StateDict out;
  save_common_state(out);
  for (size_t i = 0; i < exp_avgs_.size(); ++i) {
    if (exp_avgs_[i].defined()) out[param_state_key(static_cast<int64_t>(i), "exp_avg")] = exp_avgs_[i].clone();
  }
  return out;
}

void Lion::load_state_dict(const StateDict& state) {
  NoGradGuard no_grad;
  check_param_count(exp_avgs_.size(), "Lion.load_state_dict");
  detail::StateReader reader(state, "Lion.load_state_dict");
  const detail::CommonState common = detail::read_common_state(reader, groups_);
  std::vector<Tensor> loaded(exp_avgs_.size());
  for_each_param([&](int64_t index, const ParamGroup&, const Tensor& param) {
    const std::string key = param_state_key(index, "exp_avg");
    // A parameter that never had a gradient has no state.
    if (reader.contains(key)) loaded[static_cast<size_t>(index)] = reader.tensor_like(key, param);
  });
  reader.check_all_used();
  // Everything is valid: only now change the optimizer.
  detail::apply_common_state(common, groups_, step_count_);
  for (size_t i = 0; i < loaded.size(); ++i) exp_avgs_[i] = loaded[i].defined() ? loaded[i].clone() : Tensor();
}

}  // namespace strata::optim
