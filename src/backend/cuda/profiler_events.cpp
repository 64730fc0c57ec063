// The profiler's device timing (profiler/device_events.h): a CUDA event per span end, recorded
// on the device's current stream, the one the span's kernels were queued on.
#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_check.h"
#include "profiler/device_events.h"

namespace strata::profiler::detail {

void* record_device_event(int device) noexcept {
  try {
    cuda_detail::DeviceGuard guard(device);
    cudaEvent_t event = nullptr;
    if (cudaEventCreate(&event) != cudaSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    if (cudaEventRecord(event, cuda_detail::stream_of(device)) != cudaSuccess) {
      (void)cudaGetLastError();
      (void)cudaEventDestroy(event);
      return nullptr;
    }
    return event;
  } catch (...) {  // an unusable device: no device time for this span
    return nullptr;
  }
}

float device_elapsed_ms(void* begin, void* end) noexcept {
  if (begin == nullptr || end == nullptr) return -1;
  float ms = -1;
  auto* b = static_cast<cudaEvent_t>(begin);
  auto* e = static_cast<cudaEvent_t>(end);
  if (cudaEventSynchronize(e) != cudaSuccess || cudaEventElapsedTime(&ms, b, e) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return ms;
}

void destroy_device_event(void* event) noexcept {
  if (event != nullptr) (void)cudaEventDestroy(static_cast<cudaEvent_t>(event));
}

}  // namespace strata::profiler::detail
