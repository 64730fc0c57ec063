// A build without CUDA: the public queries (strata/tensor/cuda.h) and the runtime seam
// (tensor/cuda_memory.h, backend/cuda/cuda_backend.h) answer "no devices" or refuse naming
// the device. Ops refuse in on_device by their public name; the op entry points themselves
// (cuda_ops.h) come from their declarations (core/cuda_entry.h), a last line never reached.
#include "backend/cuda/cuda_backend.h"
#include "profiler/device_events.h"
#include "strata/core/error.h"
#include "strata/tensor/allocator.h"
#include "strata/tensor/cuda.h"

namespace strata {
namespace {

[[noreturn]] void no_cuda(const char* what, Device device) {
  STRATA_FAIL(what, ": ", device,
              " is not available: strata was built without CUDA (configure with "
              "-DSTRATA_WITH_CUDA=ON where the CUDA toolkit is installed)");
}

}  // namespace

namespace detail {
void cuda_not_built(const char* function) {
  STRATA_FAIL(function,
              ": strata was built without CUDA (configure with -DSTRATA_WITH_CUDA=ON where the CUDA "
              "toolkit is installed)");
}
}  // namespace detail

namespace cuda {
bool is_built() { return false; }
int device_count() { return 0; }
bool is_available() { return false; }
void set_device(int index) { no_cuda("cuda::set_device", Device::cuda(index)); }
int current_device() { no_cuda("cuda::current_device", Device::cuda(0)); }
void synchronize(int device) { no_cuda("cuda::synchronize", Device::cuda(device < 0 ? 0 : device)); }
}  // namespace cuda

namespace cuda_allocator {
AllocatorStats stats(int) { return {}; }
void reset_peak(int) {}
void empty_cache() {}
}  // namespace cuda_allocator

namespace cuda_detail {
void check_device(Device device, const char* what) { no_cuda(what, device); }
void* allocate(size_t, int device) { no_cuda("Storage::allocate", Device::cuda(device)); }
void deallocate(void*, size_t, int) {}
void copy(const Tensor& dst, const Tensor& src) {
  no_cuda("copy", dst.device().is_cuda() ? dst.device() : src.device());
}
void fill(const Tensor& dst, double) { no_cuda("fill", dst.device()); }
int64_t same_device_host_round_trips() { return 0; }
void multi_tensor_launch(MultiTensorKernel, DType, int device, const void*, size_t, const void*, int64_t) {
  no_cuda("multi-tensor operation", Device::cuda(device));
}
void multi_tensor_reduce(MultiTensorReduction, DType, int device, const void*, size_t, const void*, int64_t, void*,
                         size_t) {
  no_cuda("multi-tensor reduction", Device::cuda(device));
}
bool record_stream(void*, int, void*) { return false; }
void retire_stream(int, void*) {}
void poison_device(int, const std::string&) {}
void* current_stream(int) { return nullptr; }
}  // namespace cuda_detail

namespace profiler::detail {  // no device: spans have no device time
void* record_device_event(int) noexcept { return nullptr; }
float device_elapsed_ms(void*, void*) noexcept { return -1; }
void destroy_device_event(void*) noexcept {}
}  // namespace profiler::detail

}  // namespace strata
