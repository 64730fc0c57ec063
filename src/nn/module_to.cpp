// Module::to(DType), Module::to(Device): convert parameters and buffers without changing
// their identity.
#include <unordered_set>

#include "strata/autograd/grad_mode.h"
#include "strata/autograd/node.h"
#include "strata/nn/module.h"
#include "strata/tensor/cuda.h"

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
void convert_in_place(const Tensor& t, DType dtype, Device device) {
  if (t.dtype() == dtype && t.device() == device) return;
  Tensor converted = t.detach().to(dtype).to(device).contiguous();
  TensorImpl* impl = t.impl();
  impl->storage = converted.storage();
  impl->offset = converted.offset();
  impl->strides = converted.strides();
  impl->dtype = dtype;
  if (AutogradMeta* meta = impl->autograd.get()) {
    if (meta->grad.defined()) meta->grad = meta->grad.to(dtype).to(device);
    meta->grad_accumulator.reset();  // it recorded the old dtype or device; the next graph makes a new one
  }
}

}  // namespace

void Module::to(DType dtype) {
  STRATA_CHECK(is_floating(dtype), "Module::to: parameters must stay floating; ", dtype, " is not");
  NamedTensors targets = tensors_to_convert(*this);
  for (auto& [name, t] : targets) check_convertible(name, t);  // all checks before any change
  NoGradGuard no_grad;
  for (auto& [_, t] : targets) convert_in_place(t, dtype, t.device());
}

void Module::to(Device device) {
  // Checked before any tensor moves, so a refused move leaves the module as it was.
  STRATA_CHECK(device.is_cpu() || (cuda::is_built() && device.index >= 0 && device.index < cuda::device_count()),
               "Module::to: ", device, " is not available (",
               cuda::is_built() ? std::to_string(cuda::device_count()) + " CUDA devices visible"
                                : std::string("strata was built without CUDA"),
               "); the module was left unchanged");
  NamedTensors targets = tensors_to_convert(*this);
  for (auto& [name, t] : targets) check_convertible(name, t);
  NoGradGuard no_grad;
  for (auto& [_, t] : targets) convert_in_place(t, t.dtype(), device);
}

}  // namespace strata::nn
