// Module::to(DType): converts parameters and buffers without changing their identity.
#include <unordered_set>

#include "strata/autograd/grad_mode.h"
#include "strata/autograd/node.h"
#include "strata/nn/module.h"

namespace strata::nn {
namespace {

// Every parameter and floating buffer once (a tied tensor appears under several names).
NamedTensors tensors_to_convert(const Module& m) {
  NamedTensors out;
  std::unordered_set<TensorImpl*> seen;
  for (auto& [name, t] : m.named_parameters())
    if (seen.insert(t.impl()).second) out.emplace_back(name, t);
  for (auto& [name, t] : m.named_buffers())
    if (t.defined() && is_floating(t.dtype()) && seen.insert(t.impl()).second) out.emplace_back(name, t);
  return out;
}

void check_convertible(const std::string& name, const Tensor& t) {
  STRATA_CHECK(t.is_leaf(), "Module::to: '", name, "' has an autograd history; parameters and buffers must be leaves");
  const AutogradMeta* meta = t.impl()->autograd.get();
  STRATA_CHECK(!meta || meta->post_accumulate_hooks.empty(), "Module::to: '", name,
               "' is already wrapped by DDP or ZeRO (it has post-accumulate hooks); convert the model first");
}

// Points t's TensorImpl at a converted copy of its values; every handle sees the change.
void convert_in_place(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return;
  Tensor converted = t.detach().to(dtype).contiguous();
  TensorImpl* impl = t.impl();
  impl->storage = converted.storage();
  impl->offset = converted.offset();
  impl->strides = converted.strides();
  impl->dtype = dtype;
  if (AutogradMeta* meta = impl->autograd.get()) {
    if (meta->grad.defined()) meta->grad = meta->grad.to(dtype);
    meta->grad_accumulator.reset();  // it recorded the old dtype; the next graph makes a new one
  }
}

}  // namespace

void Module::to(DType dtype) {
  STRATA_CHECK(is_floating(dtype), "Module::to: parameters must stay floating; ", dtype, " is not");
  NamedTensors targets = tensors_to_convert(*this);
  for (auto& [name, t] : targets) check_convertible(name, t);  // all checks before any change
  NoGradGuard no_grad;
  for (auto& [_, t] : targets) convert_in_place(t, dtype);
}

}  // namespace strata::nn
