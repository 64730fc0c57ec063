#pragma once
// Private to src/: CUDA runtime checks. Every CUDA call goes through STRATA_CUDA, which
// throws strata::Error naming the call, the CUDA error and file:line (and the rank).
#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_backend.h"
#include "strata/core/error.h"
#include "strata/profiler/profiler.h"

#define STRATA_CUDA(call)                                                                                           \
  do {                                                                                                              \
    cudaError_t strata_cuda_rc_ = (call);                                                                           \
    if (strata_cuda_rc_ != cudaSuccess) [[unlikely]] {                                                              \
      (void)cudaGetLastError(); /* clear a non-sticky error so later calls are not blamed */                        \
      STRATA_FAIL(#call, " failed: ", cudaGetErrorString(strata_cuda_rc_), " (", cudaGetErrorName(strata_cuda_rc_), \
                  ")");                                                                                             \
    }                                                                                                               \
  } while (0)

// A kernel launch: a call into the kernels' C API (strata_*), counted for the profiler's
// "Launches" column (one count per call, even where the C function queues two kernels).
#define STRATA_LAUNCH(call)             \
  do {                                  \
    ::strata::profiler::count_launch(); \
    STRATA_CUDA(call);                  \
  } while (0)

namespace strata::cuda_detail {

// Makes `device` current on this thread for a scope and restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

inline cudaStream_t stream_of(int device) { return static_cast<cudaStream_t>(current_stream(device)); }

// An op's launch scope on x's device: checks the device first (an unusable device is
// reported naming the op, before anything is allocated), makes it current for the scope and
// holds its stream.
struct OpScope {
  DeviceGuard guard;
  cudaStream_t stream;
  OpScope(const Tensor& x, const char* op)
      : guard((check_device(x.device(), op), x.device().index)), stream(stream_of(x.device().index)) {}
};

}  // namespace strata::cuda_detail
