// The CUDA caching allocator (see strata/tensor/allocator.h). Blocks are never split or
// merged: a request is served from the free list of its rounded size, else by cudaMalloc.
#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

#include "strata/tensor/allocator.h"
#include "strata/tensor/cuda.h"
#include "tensor/allocator_buckets.h"
#include "tensor/cuda/cuda_backend.h"
#include "tensor/cuda/cuda_check.h"

namespace strata {
namespace {

struct DeviceCache {
  std::map<size_t, std::vector<void*>> free_lists;  // rounded size -> blocks
  AllocatorStats stats;
};

struct State {
  std::mutex mutex;
  std::map<int, DeviceCache> devices;
};

State& state() {
  static State* s = new State();  // never destroyed: storages may outlive static destructors
  return *s;
}

// Frees the cached blocks of one device (caller holds the lock).
void release_cached(int device, DeviceCache& cache) {
  cuda_detail::DeviceGuard guard(device);
  for (auto& [size, blocks] : cache.free_lists)
    for (void* p : blocks) (void)cudaFree(p);
  cache.free_lists.clear();
  cache.stats.cached_bytes = 0;
}

}  // namespace

namespace cuda_allocator {

AllocatorStats stats(int device) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.devices.find(device);
  return it == s.devices.end() ? AllocatorStats{} : it->second.stats;
}

void reset_peak(int device) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  AllocatorStats& st = s.devices[device].stats;
  st.peak_in_use_bytes = st.in_use_bytes;
}

void empty_cache() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  for (auto& [device, cache] : s.devices) release_cached(device, cache);
}

}  // namespace cuda_allocator

namespace cuda_detail {

void* allocate(size_t nbytes, int device) {
  check_device(Device::cuda(device), "Storage::allocate");
  const size_t size = detail::allocator_block_size(nbytes);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  DeviceCache& cache = s.devices[device];
  ++cache.stats.requests;
  auto it = cache.free_lists.find(size);
  void* p = nullptr;
  if (it != cache.free_lists.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
    cache.stats.cached_bytes -= size;
  } else {
    DeviceGuard guard(device);
    cudaError_t rc = cudaMalloc(&p, size);
    if (rc == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      release_cached(device, cache);  // give the cache back and try once more
      rc = cudaMalloc(&p, size);
    }
    if (rc != cudaSuccess) {
      (void)cudaGetLastError();
      STRATA_FAIL("out of memory on ", Device::cuda(device), " allocating ", nbytes, " bytes (", cache.stats.in_use_bytes,
                  " bytes in use by strata tensors): cudaMalloc: ", cudaGetErrorString(rc));
    }
    ++cache.stats.system_allocs;
  }
  cache.stats.in_use_bytes += size;
  cache.stats.peak_in_use_bytes = std::max(cache.stats.peak_in_use_bytes, cache.stats.in_use_bytes);
  return p;
}

void deallocate(void* ptr, size_t nbytes, int device) {
  if (ptr == nullptr) return;
  const size_t size = detail::allocator_block_size(nbytes);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  DeviceCache& cache = s.devices[device];
  cache.stats.in_use_bytes -= size;
  cache.stats.cached_bytes += size;
  cache.free_lists[size].push_back(ptr);
}

}  // namespace cuda_detail
}  // namespace strata
