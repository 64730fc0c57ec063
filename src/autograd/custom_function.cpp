#include "strata/autograd/custom_function.h"

#include "strata/autograd/function.h"
#include "strata/autograd/node.h"
#include "strata/core/type_name.h"
#include "strata/tensor/factory.h"

namespace strata::autograd {
namespace {

bool has_history(const Tensor& t) { return t.requires_grad() || !t.is_leaf(); }

}  // namespace

void AutogradContext::save_for_backward(const std::vector<Tensor>& tensors) {
  saved_.clear();
  saved_versions_.clear();
  for (const Tensor& t : tensors) {
    saved_.push_back(t.defined() ? t.detach() : Tensor());
    saved_versions_.push_back(t.defined() ? t.version() : 0);
  }
}

void AutogradContext::mark_non_differentiable(const std::vector<Tensor>& outputs) {
  for (const Tensor& t : outputs) non_differentiable_.push_back(t.impl_ptr());
}

bool AutogradContext::is_non_differentiable(const Tensor& output) const {
  if (!is_floating(output.dtype())) return true;
  for (const auto& weak : non_differentiable_)
    if (weak.lock() == output.impl_ptr()) return true;
  return false;
}

namespace detail {

std::vector<bool> needs_input_grad_of(const std::vector<Tensor>& inputs) {
  std::vector<bool> out;
  out.reserve(inputs.size());
  for (const Tensor& t : inputs) out.push_back(grad_enabled() && t.defined() && t.requires_grad());
  return out;
}

std::vector<Tensor> finish_function(const std::type_info& type, std::shared_ptr<AutogradContext> ctx,
                                    const std::vector<Tensor>& inputs, std::vector<Tensor> outputs,
                                    CustomBackward backward) {
  const std::string name = demangled_name(type);
  std::vector<size_t> differentiable;  // positions in `outputs` that get a node slot
  std::vector<TensorMeta> metas;       // of every output, to give backward zeros
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor& out = outputs[i];
    STRATA_CHECK(out.defined(), name, "::forward returned an undefined output ", i);
    if (!ctx->is_non_differentiable(out)) differentiable.push_back(i);
    // An input returned as is (or anything else with a history, or an output returned
    // twice) gets a fresh handle, so the node below can own its history.
    bool repeated = false;
    for (size_t j = 0; j < i; ++j) repeated = repeated || outputs[j].is_same(out);
    if (repeated || has_history(out)) out = out.detach();
    metas.push_back({out.shape(), out.dtype(), out.device()});
  }
  if (!needs_grad(inputs) || differentiable.empty()) return outputs;

  std::vector<Tensor> recorded;
  recorded.reserve(differentiable.size());
  for (size_t i : differentiable) recorded.push_back(outputs[i]);
  const size_t n_inputs = inputs.size();
  std::vector<SavedTensor> saved;  // checked against their versions at save_for_backward
  for (size_t i = 0; i < ctx->get_saved_variables().size(); ++i)
    saved.emplace_back(ctx->get_saved_variables()[i], ctx->saved_versions()[i]);
  record(name, inputs, recorded, std::move(saved),
         [ctx = std::move(ctx), backward = std::move(backward), differentiable, metas, n_inputs,
          name](BackwardContext& bc) {
           std::vector<Tensor> grads(metas.size());
           for (size_t j = 0; j < differentiable.size(); ++j) grads[differentiable[j]] = bc.grad(j);
           for (size_t i = 0; i < grads.size(); ++i)
             if (!grads[i].defined()) grads[i] = zeros(metas[i].shape, {.dtype = metas[i].dtype, .device = metas[i].device});
           std::vector<Tensor> result = backward(ctx.get(), std::move(grads));
           STRATA_CHECK(result.size() == n_inputs, name, "::backward returned ", result.size(),
                        " gradients; it must return one per forward argument (", n_inputs, ")");
           for (size_t i = 0; i < n_inputs; ++i)
             if (!bc.needs(i)) result[i] = Tensor();
           return result;
         });
  return outputs;
}

}  // namespace detail
}  // namespace strata::autograd
