// Tensor::register_hook: gradient hooks kept on the graph node that produces a non-leaf
// tensor's gradient (so they outlive the tensor handle, as the graph does), or on a leaf's
// autograd state (run by AccumulateGrad before it accumulates).
#include "strata/autograd/node.h"

namespace strata {

uint64_t GradHookList::add(Hook hook) {
  const uint64_t id = next_id++;
  hooks.emplace_back(id, std::move(hook));
  return id;
}

Tensor GradHookList::run(Tensor grad, const TensorMeta& meta, std::string_view where) const {
  const auto snapshot = hooks;  // a hook may remove itself (or others) while running
  for (const auto& [id, hook] : snapshot) {
    Tensor replaced = hook(grad);
    if (!replaced.defined()) continue;
    STRATA_CHECK(replaced.shape() == meta.shape && replaced.dtype() == meta.dtype, "gradient hook on ", where,
                 " returned a ", replaced.dtype(), " gradient of shape ", replaced.shape(), " for a ", meta.dtype,
                 " tensor of shape ", meta.shape);
    grad = std::move(replaced);
  }
  return grad;
}

void GradHookHandle::remove() {
  std::shared_ptr<GradHookList> list = list_.lock();
  if (!list) return;
  std::erase_if(list->hooks, [this](const auto& entry) { return entry.first == id_; });
  list_.reset();
}

std::shared_ptr<GradHookList> Node::output_grad_hooks(uint32_t slot) {
  STRATA_CHECK(slot < output_meta_.size(), "output_grad_hooks: ", name(), " has no output ", slot);
  if (output_grad_hooks_.size() <= slot) output_grad_hooks_.resize(output_meta_.size());
  auto& list = output_grad_hooks_[slot];
  if (!list) list = std::make_shared<GradHookList>();
  return list;
}

void Node::run_output_grad_hooks(std::vector<Tensor>& grad_outputs) const {
  for (size_t slot = 0; slot < output_grad_hooks_.size() && slot < grad_outputs.size(); ++slot) {
    const auto& list = output_grad_hooks_[slot];
    if (!list || list->hooks.empty() || !grad_outputs[slot].defined()) continue;
    const std::string where = "output " + std::to_string(slot) + " of " + std::string(name());
    grad_outputs[slot] = list->run(std::move(grad_outputs[slot]), output_meta_[slot], where);
  }
}

GradHookHandle Tensor::register_hook(std::function<Tensor(const Tensor& grad)> hook) {
  STRATA_CHECK(requires_grad(), "register_hook: a tensor of shape ", shape(),
               " that does not require grad never receives a gradient");
  std::shared_ptr<GradHookList> list;
  if (is_leaf()) {
    auto& meta = *impl()->autograd;
    if (!meta.grad_hooks) meta.grad_hooks = std::make_shared<GradHookList>();
    list = meta.grad_hooks;
  } else {
    list = grad_fn()->output_grad_hooks(impl()->autograd->output_nr);
  }
  const uint64_t id = list->add(std::move(hook));
  return GradHookHandle(list, id);
}

}  // namespace strata
