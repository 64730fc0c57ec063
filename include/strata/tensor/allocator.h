#pragma once
#include <cstddef>
#include <cstdint>

namespace strata {

struct AllocatorStats {
  uint64_t requests = 0;       // allocate() calls
  uint64_t system_allocs = 0;  // of which went to the system (cache misses)
  size_t in_use_bytes = 0;     // handed out and not yet returned
  size_t cached_bytes = 0;     // held in free lists for reuse
  // CUDA: freed, but another stream (cuda::record_stream) may still use it; reusable once
  // that stream's work queued before the free is done. Counts blocks never reused because
  // that work failed. Always 0 for the CPU.
  size_t pending_bytes = 0;
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
}  // namespace cpu_allocator

// The CUDA caching allocator: device blocks (cudaMalloc) in size-bucketed free lists, one
// cache per device, so a repeated step makes no cudaMalloc/cudaFree (each of which
// synchronises the device). A freed block is reused by later work on the same (default)
// stream, which runs after any earlier use of it; a block that another stream used
// (cuda::record_stream; NCCL's comm stream records itself) is reused only once that
// stream's work queued before the free is done. In a build without CUDA, stats() is empty
// and the rest do nothing.
namespace cuda_allocator {
AllocatorStats stats(int device = 0);
void reset_peak(int device = 0);
void empty_cache();  // cudaFree of every cached block on every device
}  // namespace cuda_allocator

}  // namespace strata
