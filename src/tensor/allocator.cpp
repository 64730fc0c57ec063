#include "strata/tensor/allocator.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include "strata/core/error.h"
#include "strata/profiler/profiler.h"
#include "strata/tensor/cuda.h"
#include "strata/tensor/storage.h"
#include "strata/tensor/tensor.h"
#include "tensor/allocator_buckets.h"
#include "tensor/cuda_memory.h"

namespace strata {

size_t detail::allocator_block_size(size_t nbytes) {
  if (nbytes == 0) nbytes = 1;
  if (nbytes <= (size_t{1} << 20)) return (nbytes + 511) & ~size_t{511};
  size_t pow2 = size_t{1} << (63 - __builtin_clzll(nbytes));
  size_t step = pow2 / 8;
  return (nbytes + step - 1) / step * step;
}

namespace cpu_allocator {
namespace {

constexpr size_t kAlignment = 64;

struct State {
  std::mutex mutex;
  std::map<size_t, std::vector<void*>> free_lists;  // rounded size -> blocks
  AllocatorStats stats;
};

State& state() {
  static State* s = new State();  // never destroyed: storages may outlive static destructors
  return *s;
}

}  // namespace

void* allocate(size_t nbytes) {
  size_t size = detail::allocator_block_size(nbytes);
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    ++s.stats.requests;
    s.stats.in_use_bytes += size;
    s.stats.peak_in_use_bytes = std::max(s.stats.peak_in_use_bytes, s.stats.in_use_bytes);
    auto it = s.free_lists.find(size);
    if (it != s.free_lists.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      s.stats.cached_bytes -= size;
      return p;
    }
    ++s.stats.system_allocs;
  }
  void* p = std::aligned_alloc(kAlignment, size);
  if (p == nullptr) {
    empty_cache();
    p = std::aligned_alloc(kAlignment, size);
  }
  if (p == nullptr) {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.stats.in_use_bytes -= size;
  }
  STRATA_CHECK(p != nullptr, "out of CPU memory allocating ", nbytes, " bytes");
  return p;
}

void deallocate(void* ptr, size_t nbytes) {
  if (ptr == nullptr) return;
  size_t size = detail::allocator_block_size(nbytes);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.stats.in_use_bytes -= size;
  s.stats.cached_bytes += size;
  s.free_lists[size].push_back(ptr);
}

AllocatorStats stats() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.stats;
}

void reset_peak() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.stats.peak_in_use_bytes = s.stats.in_use_bytes;
}

void empty_cache() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  for (auto& [size, blocks] : s.free_lists)
    for (void* p : blocks) std::free(p);
  s.free_lists.clear();
  s.stats.cached_bytes = 0;
}

}  // namespace cpu_allocator

namespace {

// Memory goes back to the allocator of the device it came from (a CUDA block to the CUDA
// cache, never to the CPU allocator, which would free a device pointer).
void* allocate_on(Device device, size_t nbytes) {
  profiler::count_allocation(nbytes);  // the profiler's "Allocated" column
  return device.is_cpu() ? cpu_allocator::allocate(nbytes) : cuda_detail::allocate(nbytes, device.index);
}

void deallocate_on(Device device, void* data, size_t nbytes) {
  if (device.is_cpu()) {
    cpu_allocator::deallocate(data, nbytes);
  } else {
    cuda_detail::deallocate(data, nbytes, device.index);
  }
}

}  // namespace

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device) {
  void* p = allocate_on(device, nbytes);
  return std::shared_ptr<Storage>(new Storage(p, nbytes, device, {}, true));
}

std::shared_ptr<Storage> Storage::wrap(void* data, size_t nbytes, Device device, Deleter deleter) {
  return std::shared_ptr<Storage>(new Storage(data, nbytes, device, std::move(deleter), false));
}

void Storage::release() {
  STRATA_CHECK(from_allocator_, "Storage::release: only storage from Storage::allocate can be released");
  if (released_) return;
  deallocate_on(device_, data_, nbytes_);
  data_ = nullptr;
  released_ = true;
}

void Storage::reallocate() {
  if (!released_) return;
  data_ = allocate_on(device_, nbytes_);
  released_ = false;
}

void cuda::record_stream(const Tensor& tensor, void* stream) {
  STRATA_CHECK(tensor.defined(), "cuda::record_stream: the tensor is undefined");
  STRATA_CHECK(tensor.device().is_cuda(), "cuda::record_stream: the tensor of shape ", tensor.shape(), " and dtype ",
               tensor.dtype(), " is on ", tensor.device(), "; only CUDA memory is used by streams");
  const Storage& storage = *tensor.storage();
  if (storage.released()) return;  // no memory to protect (reallocate hands out a new block)
  // False for memory strata's allocator did not hand out: its owner keeps it alive.
  (void)cuda_detail::record_stream(storage.data(), storage.device().index, stream);
}

Storage::~Storage() {
  if (released_) return;
  if (from_allocator_) {
    deallocate_on(device_, data_, nbytes_);
  } else if (deleter_) {
    deleter_(data_);
  }
}

}  // namespace strata
