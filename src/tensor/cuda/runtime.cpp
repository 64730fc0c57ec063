// Device queries and selection for CUDA builds (src/tensor/cuda_unavailable.cpp otherwise).
#include <string>

#include "tensor/cuda/cuda_backend.h"
#include "tensor/cuda/cuda_check.h"
#include "strata/tensor/cuda.h"

namespace strata {
namespace {

// cudaGetDeviceCount once per process: its answer cannot change, and on a machine without a
// driver the runtime's error explains why there is no device.
struct DeviceInfo {
  int count = 0;
  std::string why_none;  // the runtime's error when count == 0
};

const DeviceInfo& device_info() {
  static const DeviceInfo info = [] {
    DeviceInfo d;
    cudaError_t rc = cudaGetDeviceCount(&d.count);
    if (rc != cudaSuccess) {
      (void)cudaGetLastError();
      d.count = 0;
      d.why_none = std::string(cudaGetErrorName(rc)) + ": " + cudaGetErrorString(rc);
    } else if (d.count == 0) {
      d.why_none = "the CUDA runtime reports 0 devices";
    }
    return d;
  }();
  return info;
}

}  // namespace

namespace cuda {

bool is_built() { return true; }
int device_count() { return device_info().count; }
bool is_available() { return device_count() > 0; }

void set_device(int index) {
  cuda_detail::check_device(Device::cuda(index), "cuda::set_device");
  STRATA_CUDA(cudaSetDevice(index));
}

int current_device() {
  cuda_detail::check_device(Device::cuda(0), "cuda::current_device");
  int d = 0;
  STRATA_CUDA(cudaGetDevice(&d));
  return d;
}

void synchronize(int device) {
  int d = device < 0 ? current_device() : device;
  cuda_detail::check_device(Device::cuda(d), "cuda::synchronize");
  cuda_detail::DeviceGuard guard(d);
  STRATA_CUDA(cudaDeviceSynchronize());
}

}  // namespace cuda

namespace cuda_detail {

void check_device(Device device, const char* what) {
  STRATA_CHECK(device.is_cuda(), what, ": ", device, " is not a CUDA device");
  const DeviceInfo& info = device_info();
  STRATA_CHECK(info.count > 0, what, ": ", device, " is not available: this machine has no usable CUDA device (",
               info.why_none, ")");
  STRATA_CHECK(device.index >= 0 && device.index < info.count, what, ": ", device, " does not exist (this machine has ",
               info.count, " CUDA device", info.count == 1 ? "" : "s", ": cuda:0 to cuda:", info.count - 1, ")");
}

DeviceGuard::DeviceGuard(int device) {
  STRATA_CUDA(cudaGetDevice(&previous_));
  if (previous_ != device) {
    STRATA_CUDA(cudaSetDevice(device));
  } else {
    previous_ = -1;  // nothing to restore
  }
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) (void)cudaSetDevice(previous_);
}

// The legacy default stream: every strata CUDA op of every thread on a device runs in
// order on it, which is what the caching allocator's reuse relies on.
void* current_stream(int /*device*/) { return nullptr; }

}  // namespace cuda_detail
}  // namespace strata
