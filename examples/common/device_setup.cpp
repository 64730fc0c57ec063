#include "common/device_setup.h"

#include <charconv>
#include <cstdio>

#include "strata/core/error.h"
#include "strata/tensor/allocator.h"
#include "strata/tensor/cuda.h"

namespace strata::examples {

std::optional<Device> parse_device_option(const std::string& text) {
  if (text == "cpu") return Device::cpu();
  if (text == "cuda") return Device::cuda(-1);
  const std::string prefix = "cuda:";
  if (text.size() <= prefix.size() || text.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  int index = -1;
  const char* first = text.data() + prefix.size();
  const char* last = text.data() + text.size();
  const auto [end, ec] = std::from_chars(first, last, index);
  if (ec != std::errc() || end != last || index < 0) return std::nullopt;
  return Device::cuda(index);
}

void check_device_option(const TrainOptions& o) {
  const std::optional<Device> device = parse_device_option(o.device);
  STRATA_CHECK(device.has_value(), "--device '", o.device, "' is not cpu, cuda or cuda:N (N: a GPU index)");
  if (device->is_cpu()) return;
  STRATA_CHECK(cuda::is_built(), "--device ", o.device,
               ": strata was built without CUDA (configure with -DSTRATA_WITH_CUDA=ON where the CUDA toolkit is "
               "installed), so it trains on the CPU only (--device cpu)");
  const int count = cuda::device_count();
  STRATA_CHECK(count > 0, "--device ", o.device,
               ": no GPU is visible to this process (0 CUDA devices: check the driver with nvidia-smi, and "
               "CUDA_VISIBLE_DEVICES); use --device cpu");
  STRATA_CHECK(device->index < count, "--device ", o.device, ": there is no GPU ", device->index, ", only ", count,
               " GPU(s) are visible (cuda:0 to cuda:", count - 1, ")");
}

Device training_device(const TrainOptions& o) {
  const Device device = *parse_device_option(o.device);  // checked by check_device_option
  if (device.is_cpu()) return device;
  if (device.index >= 0) {
    cuda::set_device(device.index);
    return device;
  }
  return Device::cuda(cuda::current_device());  // dist::init chose local rank % GPUs
}

std::optional<DType> autocast_dtype(const TrainOptions& o) {
  if (o.autocast == "bf16") return DType::BFloat16;
  if (o.autocast == "fp16") return DType::Float16;
  return std::nullopt;
}

std::string device_note(const TrainOptions& o, Device device, int world_size) {
  std::string note;
  if (device.is_cuda()) {
    note = " on " + device.str();
    // The trainer's groups also carry CPU tensors (the loss average, checkpoint metadata, the
    // pipeline's shape agreement), which an NCCL group refuses: the MPI group takes both.
    if (world_size > 1) note += " (process groups: MPI, CUDA tensors staged through the host)";
  }
  if (o.autocast != "none")
    note += "; autocast " + o.autocast + (o.autocast == "fp16" ? " with dynamic loss scaling" : "");
  return note;
}

std::string peak_memory_note(Device device) {
  if (!device.is_cuda()) return "";
  const double gib =
      static_cast<double>(cuda_allocator::stats(device.index).peak_in_use_bytes) / (1024.0 * 1024 * 1024);
  char buf[64];
  std::snprintf(buf, sizeof buf, " | peak GPU memory %.2f GiB", gib);
  return buf;
}

}  // namespace strata::examples
