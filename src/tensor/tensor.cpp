#include "strata/tensor/tensor.h"

#include "cpu/copy.h"
#include "dispatch.h"
#include "strata/autograd/function.h"
#include "strata/autograd/grad_mode.h"
#include "strata/tensor/factory.h"

namespace strata {

int64_t Tensor::size(int64_t d) const { return shape()[static_cast<size_t>(normalize_dim(d, dim(), "size"))]; }
int64_t Tensor::stride(int64_t d) const { return strides()[static_cast<size_t>(normalize_dim(d, dim(), "stride"))]; }

bool Tensor::is_contiguous() const {
  const TensorImpl& t = checked();
  int64_t expected = 1;
  for (size_t i = t.shape.size(); i-- > 0;) {
    if (t.shape[i] != 1 && t.strides[i] != expected) return false;
    expected *= t.shape[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  const TensorImpl& t = checked();
  STRATA_CHECK(!t.storage->released(), "the memory of this tensor (shape ", t.shape,
               ") was released: a ZeRO-3 parameter used outside its unit's forward and backward (gather the "
               "parameters first, e.g. ZeroOptimizer::gathered_parameters())");
  return static_cast<char*>(t.storage->data()) + t.offset * static_cast<int64_t>(dtype_size(t.dtype));
}

double Tensor::item() const {
  STRATA_CHECK(numel() == 1, "item(): tensor of shape ", shape(), " has ", numel(), " elements, expected 1");
  STRATA_CHECK(device().is_cpu(), "item(): tensor is on ", device());
  return detail::dispatch_all(dtype(), [&]<class T>() { return detail::convert<double>(*static_cast<T*>(raw_data())); });
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  Tensor c = contiguous();
  std::vector<T> out(static_cast<size_t>(numel()));
  detail::dispatch_all(dtype(), [&]<class S>() {
    const S* s = static_cast<const S*>(c.raw_data());
    for (size_t i = 0; i < out.size(); ++i) out[i] = detail::convert<T>(s[i]);
  });
  return out;
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<bfloat16> Tensor::to_vector<bfloat16>() const;
template std::vector<float16> Tensor::to_vector<float16>() const;

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), {.dtype = dtype(), .device = device()});
  cpu::copy_strided(out, *this);
  if (autograd::needs_grad({*this})) {
    autograd::record("CloneBackward", {*this}, {out}, [](autograd::BackwardContext& ctx) {
      return std::vector<Tensor>{ctx.grad(0)};
    });
  }
  return out;
}

Tensor Tensor::to(DType target) const {
  if (target == dtype()) return *this;
  Tensor out = empty(shape(), {.dtype = target, .device = device()});
  cpu::copy_strided(out, *this);
  if (is_floating(target) && autograd::needs_grad({*this})) {
    DType source = dtype();
    autograd::record("ToDTypeBackward", {*this}, {out}, [source](autograd::BackwardContext& ctx) {
      return std::vector<Tensor>{ctx.grad(0).to(source)};
    });
  }
  return out;
}

Tensor Tensor::to(Device target) const {
  if (target == device()) return *this;
  STRATA_FAIL("to(", target, "): moving tensors between devices needs a CUDA build of strata");
}

Tensor& Tensor::zero_() { return fill_(0.0); }

Tensor& Tensor::fill_(double value) {
  STRATA_CHECK(!(grad_enabled() && requires_grad()),
               "fill_: in-place write to a tensor that requires grad; wrap it in NoGradGuard");
  cpu::fill(*this, value);
  return *this;
}

Tensor& Tensor::copy_(const Tensor& src) {
  STRATA_CHECK(!(grad_enabled() && requires_grad()),
               "copy_: in-place write to a tensor that requires grad; wrap it in NoGradGuard");
  STRATA_CHECK(src.shape() == shape(), "copy_: source shape ", src.shape(), " differs from destination shape ",
               shape());
  cpu::copy_strided(*this, src);
  return *this;
}

}  // namespace strata
