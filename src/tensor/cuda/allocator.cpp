// The CUDA caching allocator (see strata/tensor/allocator.h). Blocks are never split or
// merged: a request is served from the free list of its rounded size, else by cudaMalloc.
#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <utility>
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

// Takes every cached block of one device out of the cache (caller holds the lock). They are
// freed by free_blocks after the lock is released: cudaFree waits for the device, and
// waiting while holding the allocator's lock could deadlock with a hung collective whose
// watchdog needs the lock to release its buffers.
std::vector<void*> take_cached(DeviceCache& cache) {
  std::vector<void*> blocks;
  for (auto& [size, list] : cache.free_lists) blocks.insert(blocks.end(), list.begin(), list.end());
  cache.free_lists.clear();
  cache.stats.cached_bytes = 0;
  return blocks;
}

void free_blocks(int device, const std::vector<void*>& blocks) {
  if (blocks.empty()) return;  // no device switch (and no context) for nothing
  cuda_detail::DeviceGuard guard(device);
  for (void* p : blocks) (void)cudaFree(p);
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
  // Only a device that allocated has a peak; no entry is made for others (empty_cache would
  // then visit a device that may not exist).
  auto it = s.devices.find(device);
  if (it != s.devices.end()) it->second.stats.peak_in_use_bytes = it->second.stats.in_use_bytes;
}

void empty_cache() {
  std::vector<std::pair<int, std::vector<void*>>> taken;
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    for (auto& [device, cache] : s.devices) taken.emplace_back(device, take_cached(cache));
  }
  for (const auto& [device, blocks] : taken) free_blocks(device, blocks);
}

}  // namespace cuda_allocator

namespace cuda_detail {

void* allocate(size_t nbytes, int device) {
  check_device(Device::cuda(device), "Storage::allocate");
  const size_t size = detail::allocator_block_size(nbytes);
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    DeviceCache& cache = s.devices[device];
    ++cache.stats.requests;
    auto it = cache.free_lists.find(size);
    if (it != cache.free_lists.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      cache.stats.cached_bytes -= size;
      cache.stats.in_use_bytes += size;
      cache.stats.peak_in_use_bytes = std::max(cache.stats.peak_in_use_bytes, cache.stats.in_use_bytes);
      return p;
    }
  }
  // cudaMalloc, and on failure the cache's release and one retry, run without the lock.
  DeviceGuard guard(device);
  void* p = nullptr;
  cudaError_t rc = cudaMalloc(&p, size);
  if (rc == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    std::vector<void*> blocks;
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      blocks = take_cached(s.devices[device]);
    }
    free_blocks(device, blocks);
    rc = cudaMalloc(&p, size);
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  DeviceCache& cache = s.devices[device];
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
    size_t free_bytes = 0, total_bytes = 0;
    const bool known = cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess;
    (void)cudaGetLastError();
    STRATA_FAIL("out of memory on ", Device::cuda(device), ": requested ", nbytes, " bytes, ",
                known ? std::to_string(free_bytes) : std::string("an unknown number of"), " bytes free of ",
                known ? std::to_string(total_bytes) : std::string("?"), " after releasing strata's cache (",
                cache.stats.in_use_bytes, " bytes in use by strata tensors): cudaMalloc: ", cudaGetErrorString(rc));
  }
  ++cache.stats.system_allocs;
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
