#include "strata/optim/sgd.h"

#include <cmath>

#include "optim/multi_tensor.h"
#include "optim/state_reader.h"
#include "strata/autograd/grad_mode.h"
#include "strata/optim/param_groups.h"
#include "strata/tensor/factory.h"

namespace strata::optim {
SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : SGD(one_group(std::move(params), options.lr, options.weight_decay), options) {}

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions options) : Optimizer(std::move(groups)), options_(options) {
  STRATA_CHECK(std::isfinite(options_.momentum) && options_.momentum >= 0, "SGD: invalid momentum ", options_.momentum);
  STRATA_CHECK(std::isfinite(options_.dampening), "SGD: invalid dampening ", options_.dampening);
  STRATA_CHECK(!options_.nesterov || (options_.momentum > 0 && options_.dampening == 0),
               "SGD: nesterov needs momentum > 0 and dampening == 0 (momentum ", options_.momentum, ", dampening ",
               options_.dampening, ")");
  momentum_buffers_.resize(static_cast<size_t>(num_params()));
}

void SGD::step() {
  NoGradGuard no_grad;
  check_param_count(momentum_buffers_.size(), "SGD.step");
  const bool use_momentum = options_.momentum != 0.0;
  // Every parameter with a gradient, in one multi-tensor pass per (device, dtype).
  std::vector<multi_tensor::SgdTensorArgs> work;
  std::vector<std::pair<size_t, Tensor>> new_buffers;  // kept only once the step ran
  for_each_param([&](int64_t index, const ParamGroup& group, const Tensor& param) {
    const Tensor& grad = param.grad();
    if (!grad.defined()) return;
    Tensor buffer = momentum_buffers_[static_cast<size_t>(index)];
    const bool init_buffer = use_momentum && !buffer.defined();
    // Zero-filled: the branch-free kernel reads the buffer before discarding it on this step.
    if (init_buffer) {
      buffer = zeros(param.shape(), {.dtype = param.dtype(), .device = param.device()});
      new_buffers.emplace_back(static_cast<size_t>(index), buffer);
    }
    work.push_back({.param = param,
                    .grad = grad.contiguous(),
                    .momentum_buffer = buffer,
                    .lr = group.lr,
                    .weight_decay = group.weight_decay,
                    .init_buffer = init_buffer});
  });
  multi_tensor::fused_sgd_step(
      work, {.momentum = options_.momentum, .dampening = options_.dampening, .nesterov = options_.nesterov});
  for (auto& [index, buffer] : new_buffers) momentum_buffers_[index] = std::move(buffer);
  ++step_count_;
}

StateDict SGD::state_dict() const {
  NoGradGuard no_grad;  // the saved copies carry no autograd history
  StateDict out;
  save_common_state(out);
  for (size_t i = 0; i < momentum_buffers_.size(); ++i) {
    if (momentum_buffers_[i].defined())
      out[param_state_key(static_cast<int64_t>(i), "momentum_buffer")] = momentum_buffers_[i].clone();
  }
  return out;
}

void SGD::load_state_dict(const StateDict& state) {
  NoGradGuard no_grad;
  check_param_count(momentum_buffers_.size(), "SGD.load_state_dict");
  detail::StateReader reader(state, "SGD.load_state_dict");
  const detail::CommonState common = detail::read_common_state(reader, groups_);
  std::vector<Tensor> buffers(momentum_buffers_.size());
  for_each_param([&](int64_t index, const ParamGroup&, const Tensor& param) {
    const std::string key = param_state_key(index, "momentum_buffer");
    // A parameter that never had a gradient has no buffer; any other entry is checked below.
    if (options_.momentum != 0.0 && reader.contains(key))
      buffers[static_cast<size_t>(index)] = reader.tensor_like(key, param);
  });
  reader.check_all_used();
  // Everything is valid: only now change the optimizer.
  detail::apply_common_state(common, groups_, step_count_);
  for (size_t i = 0; i < buffers.size(); ++i)
    momentum_buffers_[i] = buffers[i].defined() ? buffers[i].clone() : Tensor();
}

}  // namespace strata::optim
