// Tensor's methods that run a device kernel or record autograd (declared with the class in
// strata/tensor/tensor.h, defined here in the ops layer, so the tensor layer itself calls
// neither): conversions, clone, and the in-place fill and copy.
#include "strata/autograd/function.h"
#include "strata/autograd/grad_mode.h"
#include "strata/tensor/factory.h"
#include "strata/tensor/tensor.h"
#include "tensor/device_copy.h"

namespace strata {

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), {.dtype = dtype(), .device = device()});
  detail::copy_any(out, *this);
  if (autograd::needs_grad({*this})) {
    autograd::record("CloneBackward", {*this}, {out}, {},
                     [](autograd::BackwardContext& ctx) { return std::vector<Tensor>{ctx.grad(0)}; });
  }
  return out;
}

Tensor Tensor::to(DType target) const {
  if (target == dtype()) return *this;
  Tensor out = empty(shape(), {.dtype = target, .device = device()});
  detail::copy_any(out, *this);
  if (is_floating(target) && autograd::needs_grad({*this})) {
    DType source = dtype();
    autograd::record("ToDTypeBackward", {*this}, {out}, {},
                     [source](autograd::BackwardContext& ctx) { return std::vector<Tensor>{ctx.grad(0).to(source)}; });
  }
  return out;
}

Tensor Tensor::to(Device target) const {
  if (target == device()) return *this;
  Tensor out = empty(shape(), {.dtype = dtype(), .device = target});
  detail::copy_any(out, *this);
  if (autograd::needs_grad({*this})) {
    Device source = device();
    autograd::record("ToDeviceBackward", {*this}, {out}, {},
                     [source](autograd::BackwardContext& ctx) { return std::vector<Tensor>{ctx.grad(0).to(source)}; });
  }
  return out;
}

Tensor& Tensor::zero_() { return fill_(0.0); }

Tensor& Tensor::fill_(double value) {
  STRATA_CHECK(!(grad_enabled() && requires_grad()),
               "fill_: in-place write to a tensor that requires grad; wrap it in NoGradGuard");
  detail::fill_any(*this, value);
  bump_version();
  return *this;
}

Tensor& Tensor::copy_(const Tensor& src) {
  STRATA_CHECK(!(grad_enabled() && requires_grad()),
               "copy_: in-place write to a tensor that requires grad; wrap it in NoGradGuard");
  STRATA_CHECK(src.shape() == shape(), "copy_: source shape ", src.shape(), " differs from destination shape ",
               shape());
  detail::copy_any(*this, src);
  bump_version();
  return *this;
}

}  // namespace strata
