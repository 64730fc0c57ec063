#include "backend/dispatch/device_dispatch.h"

#include "strata/core/error.h"

namespace strata::detail {

void unsupported_device(std::string_view op, Device device) {
  const char* kind = device.is_cuda() ? "CUDA" : "device";
  STRATA_FAIL(op, ": no ", kind, " implementation yet (tensor on ", device,
              "); run it on CPU tensors (move them with .to(Device::cpu()))");
}

void mixed_devices(std::string_view op, std::string_view name_a, const Tensor& a, std::string_view name_b,
                   const Tensor& b) {
  STRATA_FAIL(op, ": inputs are on different devices: ", name_a, " of shape ", a.shape(), " on ", a.device(), ", ",
              name_b, " of shape ", b.shape(), " on ", b.device(), " (move them to one device with .to())");
}

Device common_device(std::string_view op, std::initializer_list<OpInput> inputs) {
  const OpInput* first = nullptr;
  for (const OpInput& in : inputs) {
    if (!in.tensor.defined()) continue;
    if (first == nullptr) {
      first = &in;
    } else if (in.tensor.device() != first->tensor.device()) [[unlikely]] {
      mixed_devices(op, first->name, first->tensor, in.name, in.tensor);
    }
  }
  return first != nullptr ? first->tensor.device() : Device::cpu();
}

}  // namespace strata::detail
