// The CUDA caching allocator (see strata/tensor/allocator.h): the policy of
// tensor/caching_allocator.h, one per device, over cudaMalloc/cudaFree and CUDA events.
#include <atomic>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "strata/tensor/allocator.h"
#include "strata/tensor/cuda.h"
#include "tensor/caching_allocator.h"

namespace strata {
namespace {

// The thin CUDA side of one device. Everything but malloc runs under the policy's lock
// except free_blocks: cudaFree waits for the device, and waiting while holding the lock
// could deadlock with a hung collective whose watchdog needs it to release its buffers.
// Event calls only enqueue or poll.
class CudaBackend final : public detail::AllocatorBackend {
 public:
  explicit CudaBackend(int device) : device_(device) {}

  void* malloc(size_t bytes) override {
    cuda_detail::DeviceGuard guard(device_);
    void* p = nullptr;
    last_error = cudaMalloc(&p, bytes);
    if (last_error == cudaSuccess) return p;
    (void)cudaGetLastError();
    return nullptr;
  }

  void free_blocks(const std::vector<void*>& blocks) noexcept override {
    try {
      cuda_detail::DeviceGuard guard(device_);
      for (void* p : blocks) (void)cudaFree(p);
    } catch (const std::exception&) {  // no device to switch to: nothing can be freed
    }
  }

  Event create_event() noexcept override {
    try {
      cuda_detail::DeviceGuard guard(device_);
      cudaEvent_t e = nullptr;
      if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess) return e;
      (void)cudaGetLastError();
    } catch (const std::exception&) {
    }
    return nullptr;
  }

  void destroy_event(Event e) noexcept override { (void)cudaEventDestroy(static_cast<cudaEvent_t>(e)); }

  bool record_event(Event e, Stream s) noexcept override {
    try {
      cuda_detail::DeviceGuard guard(device_);
      if (cudaEventRecord(static_cast<cudaEvent_t>(e), static_cast<cudaStream_t>(s)) == cudaSuccess) return true;
      (void)cudaGetLastError();
    } catch (const std::exception&) {
    }
    return false;
  }

  EventStatus query_event(Event e) noexcept override {
    const cudaError_t rc = cudaEventQuery(static_cast<cudaEvent_t>(e));
    if (rc == cudaSuccess) return EventStatus::Complete;
    if (rc == cudaErrorNotReady) return EventStatus::NotReady;
    (void)cudaGetLastError();
    return EventStatus::Failed;
  }

  std::string free_memory() override {
    cuda_detail::DeviceGuard guard(device_);
    size_t free_bytes = 0, total_bytes = 0;
    const bool known = cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess;
    (void)cudaGetLastError();
    return known ? std::to_string(free_bytes) + " bytes free of " + std::to_string(total_bytes)
                 : "an unknown number of bytes free of ?";
  }

  std::string malloc_error() override { return std::string("cudaMalloc: ") + cudaGetErrorString(last_error); }

 private:
  int device_;
  // The calling thread's latest cudaMalloc result (read after its failed retry).
  static inline thread_local cudaError_t last_error = cudaSuccess;
};

struct DeviceAllocator {
  explicit DeviceAllocator(int device) : backend(device), cache(backend, "cuda:" + std::to_string(device)) {}
  CudaBackend backend;
  detail::CachingAllocator cache;
};

// One allocator per device index, made on first allocation and never destroyed (storages
// may outlive static destructors). Looked up without a lock: the hot path takes only the
// policy's own.
constexpr int kMaxDevices = 64;
std::atomic<DeviceAllocator*> allocators[kMaxDevices];
std::mutex create_mutex;

// The device's allocator; null when it never allocated (stats, reset_peak and empty_cache
// make none, which would later visit a device that may not exist).
detail::CachingAllocator* find(int device) {
  if (device < 0 || device >= kMaxDevices) return nullptr;
  DeviceAllocator* a = allocators[device].load(std::memory_order_acquire);
  return a == nullptr ? nullptr : &a->cache;
}

detail::CachingAllocator& find_or_create(int device) {
  STRATA_CHECK(device >= 0 && device < kMaxDevices, "Storage::allocate: ", Device::cuda(device),
               ": strata's CUDA allocator serves device indices 0 to ", kMaxDevices - 1);
  if (detail::CachingAllocator* c = find(device)) return *c;
  std::lock_guard<std::mutex> lock(create_mutex);
  DeviceAllocator* a = allocators[device].load(std::memory_order_acquire);
  if (a == nullptr) {
    a = new DeviceAllocator(device);
    allocators[device].store(a, std::memory_order_release);
  }
  return a->cache;
}

}  // namespace

namespace cuda_allocator {

AllocatorStats stats(int device) {
  detail::CachingAllocator* c = find(device);
  return c == nullptr ? AllocatorStats{} : c->stats();
}

void reset_peak(int device) {
  if (detail::CachingAllocator* c = find(device)) c->reset_peak();
}

void empty_cache() {
  for (int d = 0; d < kMaxDevices; ++d)
    if (detail::CachingAllocator* c = find(d)) c->empty_cache();
}

}  // namespace cuda_allocator

namespace cuda_detail {

void* allocate(size_t nbytes, int device) {
  check_device(Device::cuda(device), "Storage::allocate");
  return find_or_create(device).allocate(nbytes, current_stream(device));
}

void deallocate(void* ptr, size_t /*nbytes*/, int device) {
  if (ptr == nullptr) return;
  if (detail::CachingAllocator* c = find(device)) c->deallocate(ptr);
}

bool record_stream(void* block, int device, void* stream) {
  detail::CachingAllocator* c = find(device);
  return c != nullptr && c->record_stream(block, stream);
}

void retire_stream(int device, void* stream) {
  if (detail::CachingAllocator* c = find(device)) c->retire_stream(stream);
}

}  // namespace cuda_detail
}  // namespace strata
