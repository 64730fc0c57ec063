#include "strata/optim/adam.h"

#include <cmath>

#include "optim/multi_tensor.h"
#include "optim/state_reader.h"
#include "strata/autograd/grad_mode.h"
#include "strata/optim/param_groups.h"
#include "strata/tensor/factory.h"

namespace strata::optim {
namespace {

AdamOptions to_adam(const AdamWOptions& o) {
  return {.lr = o.lr,
          .beta1 = o.beta1,
          .beta2 = o.beta2,
          .eps = o.eps,
          .weight_decay = o.weight_decay,
          .decoupled_weight_decay = true};
}

}  // namespace

Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : Adam(one_group(std::move(params), options.lr, options.weight_decay), options) {}

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions options) : Optimizer(std::move(groups)), options_(options) {
  STRATA_CHECK(options_.beta1 >= 0 && options_.beta1 < 1, "Adam: invalid beta1 ", options_.beta1,
               " (needs 0 <= beta1 < 1)");
  STRATA_CHECK(options_.beta2 >= 0 && options_.beta2 < 1, "Adam: invalid beta2 ", options_.beta2,
               " (needs 0 <= beta2 < 1)");
  STRATA_CHECK(std::isfinite(options_.eps) && options_.eps >= 0, "Adam: invalid eps ", options_.eps);
  state_.resize(static_cast<size_t>(num_params()));
}

void Adam::step() {
  NoGradGuard no_grad;
  check_param_count(state_.size(), "Adam.step");
  // Every parameter with a gradient, in one multi-tensor pass per (device, dtype).
  std::vector<multi_tensor::AdamTensorArgs> work;
  for_each_param([&](int64_t index, const ParamGroup& group, const Tensor& param) {
    const Tensor& grad = param.grad();
    if (!grad.defined()) return;
    STRATA_CHECK(param.is_contiguous(), "Adam.step: parameter ", index, " ", param.shape(), " is not contiguous");
    ParamState& st = state_[static_cast<size_t>(index)];
    if (st.step == 0) {
      st.exp_avg = zeros(param.shape(), {.dtype = param.dtype(), .device = param.device()});
      st.exp_avg_sq = zeros(param.shape(), {.dtype = param.dtype(), .device = param.device()});
    }
    work.push_back({.param = param,
                    .exp_avg = st.exp_avg,
                    .exp_avg_sq = st.exp_avg_sq,
                    .grad = grad.contiguous(),
                    .lr = group.lr,
                    .weight_decay = group.weight_decay,
                    .step = st.step + 1});
  });
  multi_tensor::fused_adam_step(work, {.beta1 = options_.beta1,
                                       .beta2 = options_.beta2,
                                       .eps = options_.eps,
                                       .decoupled_weight_decay = options_.decoupled_weight_decay});
  // Counted only once the update ran: a refused step leaves the optimizer as it was.
  for_each_param([&](int64_t index, const ParamGroup&, const Tensor& param) {
    if (param.grad().defined()) ++state_[static_cast<size_t>(index)].step;
  });
  ++step_count_;
}

StateDict Adam::state_dict() const {
  NoGradGuard no_grad;  // the saved copies carry no autograd history
  StateDict out;
  save_common_state(out);
  for (size_t i = 0; i < state_.size(); ++i) {
    const ParamState& st = state_[i];
    if (st.step == 0) continue;
    const auto index = static_cast<int64_t>(i);
    out[param_state_key(index, "step")] = scalar_tensor(static_cast<double>(st.step), {.dtype = DType::Int64});
    out[param_state_key(index, "exp_avg")] = st.exp_avg.clone();
    out[param_state_key(index, "exp_avg_sq")] = st.exp_avg_sq.clone();
  }
  return out;
}

void Adam::load_state_dict(const StateDict& state) {
  NoGradGuard no_grad;
  check_param_count(state_.size(), "Adam.load_state_dict");
  detail::StateReader reader(state, options_.decoupled_weight_decay ? "AdamW.load_state_dict" : "Adam.load_state_dict");
  const detail::CommonState common = detail::read_common_state(reader, groups_);
  std::vector<ParamState> loaded(state_.size());
  for_each_param([&](int64_t index, const ParamGroup&, const Tensor& param) {
    const std::string step_key = param_state_key(index, "step");
    // A parameter that never had a gradient has no state; its step key is then absent.
    // Stray exp_avg entries without a step are reported by check_all_used.
    if (!reader.contains(step_key)) return;
    ParamState& st = loaded[static_cast<size_t>(index)];
    st.step = reader.int64_scalar(step_key);
    STRATA_CHECK(st.step > 0, reader.who(), ": key \"", step_key, "\" holds ", st.step, ", expected > 0");
    st.exp_avg = reader.tensor_like(param_state_key(index, "exp_avg"), param);
    st.exp_avg_sq = reader.tensor_like(param_state_key(index, "exp_avg_sq"), param);
  });
  reader.check_all_used();
  // Everything is valid: only now change the optimizer.
  detail::apply_common_state(common, groups_, step_count_);
  for (size_t i = 0; i < loaded.size(); ++i) {
    ParamState& st = loaded[i];
    if (st.step > 0) {
      st.exp_avg = st.exp_avg.clone();  // own copies: the dict may be reused or changed
      st.exp_avg_sq = st.exp_avg_sq.clone();
    }
    state_[i] = std::move(st);
  }
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options) : Adam(std::move(params), to_adam(options)) {}
AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions options) : Adam(std::move(groups), to_adam(options)) {}

}  // namespace strata::optim
