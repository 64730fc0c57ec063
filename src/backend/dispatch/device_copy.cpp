// The device switch behind tensor/device_copy.h: the tensor layer declares copy and fill,
// the backends run them.
#include "tensor/device_copy.h"

#include "backend/cpu/copy.h"
#include "backend/cuda/cuda_backend.h"

namespace strata::detail {

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

}  // namespace strata::detail
