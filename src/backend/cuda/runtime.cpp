// Device queries and selection for CUDA builds (src/backend/cuda/absent.cpp otherwise).
#include <map>
#include <mutex>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
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

namespace {

// Devices made unusable by a fatal communication error (poison_device), with the reason.
std::mutex poison_mu;
std::map<int, std::string> poisoned_devices;

// cuCtxGetCurrent, reached through the runtime's driver entry point rather than by linking
// libcuda, which machines without a driver lack. Null if the driver does not provide it.
using CtxGetCurrent = int (*)(void**);
CtxGetCurrent ctx_get_current() {
  static const CtxGetCurrent fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &p, 12000, cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return CtxGetCurrent{nullptr};
    }
    return reinterpret_cast<CtxGetCurrent>(p);
  }();
  return fn;
}

// Whether the calling thread has a current CUDA context (true when that cannot be told).
bool thread_has_context() {
  const CtxGetCurrent fn = ctx_get_current();
  if (fn == nullptr) return true;
  void* ctx = nullptr;
  return fn(&ctx) == 0 && ctx != nullptr;
}

}  // namespace

void check_device(Device device, const char* what) {
  STRATA_CHECK(device.is_cuda(), what, ": ", device, " is not a CUDA device");
  {
    std::lock_guard<std::mutex> lk(poison_mu);
    auto it = poisoned_devices.find(device.index);
    STRATA_CHECK(it == poisoned_devices.end(), what, ": ", device,
                 " is unusable after a fatal communication error (its memory may hold partial results): ", it->second);
  }
  const DeviceInfo& info = device_info();
  STRATA_CHECK(info.count > 0, what, ": ", device, " is not available: this machine has no usable CUDA device (",
               info.why_none, ")");
  STRATA_CHECK(device.index >= 0 && device.index < info.count, what, ": ", device, " does not exist (this machine has ",
               info.count, " CUDA device", info.count == 1 ? "" : "s", ": cuda:0 to cuda:", info.count - 1, ")");
}

void poison_device(int device, const std::string& why) {
  std::lock_guard<std::mutex> lk(poison_mu);
  poisoned_devices.emplace(device, why);  // the first reason stays
}

// A thread that never chose a device has no context; cudaGetDevice then says 0, and
// restoring 0 on exit would create a context on GPU 0 (hundreds of MB on a GPU that may
// belong to another rank). Such a thread stays on `device` instead.
DeviceGuard::DeviceGuard(int device) {
  STRATA_CUDA(cudaGetDevice(&previous_));
  if (previous_ != device) {
    // Asked only when switching (the common same-device guard costs no driver call).
    const bool had_context = thread_has_context();
    STRATA_CUDA(cudaSetDevice(device));
    if (!had_context) previous_ = -1;
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
