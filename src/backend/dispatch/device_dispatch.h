#pragma once
// The device seam of the ops in ops/: check the arguments once (shapes, dtypes, one device
// for all inputs), then run the device's implementation through on_device's switch, once
// per kernel call (never per element: no registry, no virtual call, no std::function):
//   Tensor out = detail::on_device("gelu", x.device(), [&] { return cpu::gelu_forward(x); });
// A device without an implementation fails in that switch, before its kernel allocates
// anything (device-neutral preparation, such as a contiguous copy, may run first). A CUDA
// implementation arrives as a second function, cuda_ops::op, with an overload
// on_device(op, device, cpu, cuda) whose CUDA case calls it.
#include <initializer_list>
#include <string_view>
#include <utility>

#include <string>

#include "core/cuda_entry.h"
#include "strata/profiler/profiler.h"
#include "strata/tensor/tensor.h"
#include "tensor/cuda_memory.h"

namespace strata::detail {

// Throws "<op>: no CUDA implementation yet (tensor on cuda:0); ...", with a hint to move
// the inputs to the CPU.
[[noreturn]] void unsupported_device(std::string_view op, Device device);

// Throws naming the op and both inputs (name, shape, device) when they are on different
// devices.
[[noreturn]] void mixed_devices(std::string_view op, std::string_view name_a, const Tensor& a, std::string_view name_b,
                                const Tensor& b);

// An op's input and the name its messages give it.
struct OpInput {
  std::string_view name;
  const Tensor& tensor;
};

// The device all defined inputs are on (the CPU when none is defined); inputs on two
// devices fail with mixed_devices.
Device common_device(std::string_view op, std::initializer_list<OpInput> inputs);

// Runs cpu() for a CPU device; any other device has no implementation of `op` yet.
template <class CpuFn>
decltype(auto) on_device(std::string_view op, Device device, CpuFn&& cpu) {
  profiler::Scope scope(op, device);  // one relaxed load when no profiler session records
  switch (device.type) {
    case DeviceType::CPU: return std::forward<CpuFn>(cpu)();
    case DeviceType::CUDA: break;
  }
  unsupported_device(op, device);
}

// Runs cpu() or cuda() by the device's type (cuda: the op's cuda_ops:: implementation).
template <class CpuFn, class CudaFn>
decltype(auto) on_device(std::string_view op, Device device, CpuFn&& cpu, CudaFn&& cuda) {
  profiler::Scope scope(op, device);
  switch (device.type) {
    case DeviceType::CPU: return std::forward<CpuFn>(cpu)();
    case DeviceType::CUDA:
      // Without CUDA, refuse here in the op's own name ("gelu: cuda:0 is not available: strata
      // was built without CUDA"), before the entry point's generic refusal.
      if constexpr (!STRATA_HAS_CUDA) cuda_detail::check_device(device, std::string(op).c_str());
      return std::forward<CudaFn>(cuda)();
  }
  unsupported_device(op, device);
}

}  // namespace strata::detail
