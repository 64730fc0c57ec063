#pragma once
// The policy of a device's caching allocator, apart from the device (CUDA's is in
// backend/cuda/allocator.cpp; the unit tests drive it with a scripted backend).
//
// Blocks are never split or merged: a request is served from the free list of its rounded
// size (detail::allocator_block_size) and of the stream it is allocated for, else by the
// backend's malloc. A block remembers that stream; record_stream adds others that use it.
// Freeing a block that no other stream used puts it back on its free list at once (later
// work on its own stream runs after every earlier use). Freeing one that other streams used
// records an event on each of them and keeps the block pending until all have completed:
// only then can it be handed out again. Events are polled, never waited for, on allocate,
// stats and empty_cache. A block whose event fails (a broken device) stays pending for
// good: memory that a kernel may still write is never reused.
//
// Thread-safe. The lock is never held across backend malloc/free (which may wait for the
// device): a hung device's watchdog must still be able to free tensors.
#include <cstddef>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "strata/tensor/allocator.h"

namespace strata::detail {

// What the policy needs from a device. Streams and events are the device's handles (CUDA:
// cudaStream_t and cudaEvent_t). Only malloc, free_memory and malloc_error may throw.
class AllocatorBackend {
 public:
  using Stream = void*;
  using Event = void*;
  enum class EventStatus { Complete, NotReady, Failed };

  virtual ~AllocatorBackend() = default;
  // `bytes` of device memory, or nullptr when it cannot be had (out of memory).
  virtual void* malloc(size_t bytes) = 0;
  virtual void free_blocks(const std::vector<void*>& blocks) noexcept = 0;
  virtual Event create_event() noexcept = 0;  // nullptr on failure
  virtual void destroy_event(Event event) noexcept = 0;
  // Records `event` after the work queued on `stream` so far; false on failure.
  virtual bool record_event(Event event, Stream stream) noexcept = 0;
  virtual EventStatus query_event(Event event) noexcept = 0;
  // For the out-of-memory error, after a retried malloc failed: the device's free memory
  // ("<free> bytes free of <total>") and the runtime's reason ("cudaMalloc: ...").
  virtual std::string free_memory() = 0;
  virtual std::string malloc_error() = 0;
};

class CachingAllocator {
 public:
  using Stream = AllocatorBackend::Stream;

  // `device_name` names the device in errors ("cuda:0"). The backend outlives this.
  CachingAllocator(AllocatorBackend& backend, std::string device_name);
  ~CachingAllocator();  // frees the cached blocks (pending and in-use ones are left alone)
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least nbytes for work on `stream`. When the backend has no memory, every
  // reusable cached block is released and malloc retried once; then an error names the
  // requested and free bytes.
  void* allocate(size_t nbytes, Stream stream);
  // Returns a block from allocate (null: nothing). Never throws.
  void deallocate(void* block) noexcept;
  // Marks that work on `stream` uses `block` (in use). False, and nothing recorded, when
  // `block` is not an in-use block of this allocator.
  bool record_stream(void* block, Stream stream);
  // `stream` is about to be destroyed: each in-use block that it uses waits instead for an
  // event recorded on it now, so its later free never names the dead stream.
  void retire_stream(Stream stream) noexcept;

  AllocatorStats stats();
  void reset_peak();
  // Frees every reusable cached block (pending blocks whose events completed included).
  void empty_cache();

 private:
  using Event = AllocatorBackend::Event;
  struct Block {
    size_t size = 0;
    Stream stream = nullptr;    // allocated for
    std::vector<Stream> uses;   // other streams (record_stream)
    std::vector<Event> events;  // of retired streams, or recorded at free
    bool failed = false;        // an event could not be made or recorded: never reuse
  };
  struct Pending {
    void* ptr = nullptr;
    Block block;
  };
  using FreeKey = std::pair<Stream, size_t>;
  struct FreeKeyHash {
    size_t operator()(const FreeKey& k) const noexcept;
  };

  // Under mu_: moves pending blocks whose events all completed to their free lists.
  void poll_pending();
  // Under mu_: takes every free-listed block out of the cache (freed after unlocking).
  std::vector<void*> take_cached();
  Event pooled_event();                       // under mu_; null on failure
  void push_free(void* ptr, const Block& b);  // under mu_

  AllocatorBackend& backend_;
  const std::string device_name_;
  std::mutex mu_;
  std::unordered_map<FreeKey, std::vector<void*>, FreeKeyHash> free_lists_;
  std::unordered_map<void*, Block> in_use_;
  // Map nodes of freed blocks, reused by the next allocations (a bounded stash).
  static constexpr size_t kSpareNodes = 64;
  std::vector<std::unordered_map<void*, Block>::node_type> spare_nodes_;
  std::vector<Pending> pending_;  // waiting for events
  std::vector<Pending> stuck_;    // an event failed: never reused
  std::vector<Event> event_pool_;
  AllocatorStats stats_;
};

}  // namespace strata::detail
