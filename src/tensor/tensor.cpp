#include "strata/tensor/tensor.h"

#include "cpu/copy.h"
#include "cuda/cuda_backend.h"
#include "device_copy.h"
#include "cpu/dtype_dispatch.h"
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

namespace detail {
namespace {
thread_local const char* t_cpu_op = nullptr;
}
const char* current_cpu_op() { return t_cpu_op; }
CpuOpScope::CpuOpScope(const char* op) : previous_(t_cpu_op) { t_cpu_op = op; }
CpuOpScope::~CpuOpScope() { t_cpu_op = previous_; }

void copy_any(const Tensor& dst, const Tensor& src) {
  if (dst.device().is_cpu() && src.device().is_cpu()) {
    cpu::copy_strided(dst, src);
  } else {
    cuda_detail::copy(dst, src);
  }
}

void fill_any(const Tensor& dst, double value) {
  switch (dst.device().type) {
    case DeviceType::CPU: cpu::fill(dst, value); return;
    case DeviceType::CUDA: cuda_detail::fill(dst, value); return;
  }
}
}  // namespace detail

void* Tensor::data_ptr() const {
  const TensorImpl& t = checked();
  if (t.storage->released()) [[unlikely]] {
    if (const auto& note = t.storage->released_note())
      STRATA_FAIL(note(static_cast<size_t>(t.offset) * dtype_size(t.dtype)), " (read of a tensor of shape ", t.shape,
                  ")");
    STRATA_FAIL("the memory of this tensor (shape ", t.shape,
                ") was released: a ZeRO-3 parameter used outside its unit's forward and backward (gather the "
                "parameters first, e.g. ZeroOptimizer::gathered_parameters())");
  }
  return static_cast<char*>(t.storage->data()) + t.offset * static_cast<int64_t>(dtype_size(t.dtype));
}

void* Tensor::raw_data() const {
  const TensorImpl& t = checked();
  if (!t.storage->device().is_cpu()) [[unlikely]] {
    const char* op = detail::current_cpu_op();
    STRATA_FAIL(op ? op : "a CPU op", ": ", t.dtype, " tensor of shape ", t.shape, " is on ", t.storage->device(),
                ", and this code reads host memory; it has no ", t.storage->device().is_cuda() ? "CUDA" : "device",
                " path yet (move the tensor with .to(Device::cpu()))");
  }
  return data_ptr();
}

double Tensor::item() const {
  STRATA_CHECK(numel() == 1, "item(): tensor of shape ", shape(), " has ", numel(), " elements, expected 1");
  if (!device().is_cpu()) return to(Device::cpu()).item();
  return detail::dispatch_all(dtype(), [&]<class T>() { return detail::convert<double>(*static_cast<T*>(raw_data())); });
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  Tensor c = device().is_cpu() ? contiguous() : to(Device::cpu());
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
  detail::copy_any(out, *this);
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
  detail::copy_any(out, *this);
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
  Tensor out = empty(shape(), {.dtype = dtype(), .device = target});
  detail::copy_any(out, *this);
  if (autograd::needs_grad({*this})) {
    Device source = device();
    autograd::record("ToDeviceBackward", {*this}, {out}, [source](autograd::BackwardContext& ctx) {
      return std::vector<Tensor>{ctx.grad(0).to(source)};
    });
  }
  return out;
}

Tensor& Tensor::zero_() { return fill_(0.0); }

Tensor& Tensor::fill_(double value) {
  STRATA_CHECK(!(grad_enabled() && requires_grad()),
               "fill_: in-place write to a tensor that requires grad; wrap it in NoGradGuard");
  detail::fill_any(*this, value);
  return *this;
}

Tensor& Tensor::copy_(const Tensor& src) {
  STRATA_CHECK(!(grad_enabled() && requires_grad()),
               "copy_: in-place write to a tensor that requires grad; wrap it in NoGradGuard");
  STRATA_CHECK(src.shape() == shape(), "copy_: source shape ", src.shape(), " differs from destination shape ",
               shape());
  detail::copy_any(*this, src);
  return *this;
}

}  // namespace strata
