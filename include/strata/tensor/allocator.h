#pragma once
#include <cstddef>
#include <cstdint>

namespace strata {

struct AllocatorStats {
  uint64_t requests = 0;       // allocate() calls
  uint64_t system_allocs = 0;  // of which went to the system (cache misses)
  size_t in_use_bytes = 0;     // handed out and not yet returned
  size_t cached_bytes = 0;     // held in free lists for reuse
  size_t peak_in_use_bytes = 0;
};

// The CPU caching allocator: 64-byte aligned blocks kept in size-bucketed free lists, so a
// training step that repeats the previous one's allocations makes no system call.
namespace cpu_allocator {
void* allocate(size_t nbytes);
void deallocate(void* ptr, size_t nbytes);
AllocatorStats stats();
void reset_peak();
void empty_cache();  // returns every cached block to the system
// The bucket a request of nbytes is served from (exposed for tests).
size_t rounded_size(size_t nbytes);
}  // namespace cpu_allocator

}  // namespace strata
