#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "strata/core/device.h"

namespace strata {

// A block of memory on one device, shared by every tensor that views it.
class Storage {
 public:
  using Deleter = std::function<void(void*)>;
  // Allocates from the device's caching allocator.
  static std::shared_ptr<Storage> allocate(size_t nbytes, Device device);
  // Wraps memory the caller owns; `deleter` (may be empty: not owned) runs when the last
  // tensor viewing it goes away.
  static std::shared_ptr<Storage> wrap(void* data, size_t nbytes, Device device, Deleter deleter);

  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

  // Frees the memory but keeps this object, so every tensor viewing it (including the
  // detached copies autograd saves for backward) sees the memory again after reallocate().
  // ZeRO-3 frees a unit's gathered parameters between uses this way. While released, reading
  // a tensor of this storage throws (Tensor::raw_data checks). Only for allocate()d storage.
  void release();
  // Fresh memory of nbytes() bytes (contents undefined); no-op unless released.
  void reallocate();
  bool released() const { return released_; }

  // How many in-place writes this memory has seen, shared by every tensor viewing it (views,
  // detached copies, tensors packed into one buffer). Autograd snapshots it when it saves a
  // tensor for backward and refuses the backward if it moved (function.h, SavedTensor).
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }
  // What a read of the released memory at a byte offset hit, for the error (ZeRO-3 names the
  // parameter there and its unit). Unset: the error says only that the memory was released.
  using ReleasedNote = std::function<std::string(size_t byte_offset)>;
  void set_released_note(ReleasedNote note) { released_note_ = std::move(note); }
  const ReleasedNote& released_note() const { return released_note_; }

 private:
  Storage(void* data, size_t nbytes, Device device, Deleter deleter, bool from_allocator)
      : data_(data), nbytes_(nbytes), device_(device), deleter_(std::move(deleter)), from_allocator_(from_allocator) {}
  void* data_;
  size_t nbytes_;
  Device device_;
  Deleter deleter_;
  bool from_allocator_;
  bool released_ = false;
  std::atomic<uint64_t> version_{0};
  ReleasedNote released_note_;
};

}  // namespace strata
