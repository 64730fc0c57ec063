// A build without CUDA: the public queries (strata/tensor/cuda.h) and the runtime seam
// (backend/cuda/cuda_backend.h) answer "no devices", and check_device, which every CUDA
// allocation, copy and op passes first, refuses with one clear message. The entry points
// that only refuse come from their declarations (core/cuda_entry.h).
#include "strata/core/error.h"
#include "strata/tensor/allocator.h"
#include "strata/tensor/cuda.h"
#include "backend/cuda/cuda_backend.h"

namespace strata {
namespace {

[[noreturn]] void no_cuda(const char* what, Device device) {
  STRATA_FAIL(what, ": ", device, " is not available: strata was built without CUDA (configure with "
              "-DSTRATA_WITH_CUDA=ON where the CUDA toolkit is installed)");
}

}  // namespace

namespace detail {
void cuda_not_built(const char* function) {
  STRATA_FAIL(function, ": strata was built without CUDA (configure with -DSTRATA_WITH_CUDA=ON where the CUDA "
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
void deallocate(void*, size_t, int) {}
bool record_stream(void*, int, void*) { return false; }
void retire_stream(int, void*) {}
void poison_device(int, const std::string&) {}
void* current_stream(int) { return nullptr; }
}  // namespace cuda_detail

}  // namespace strata
