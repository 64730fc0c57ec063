#include "tensor/caching_allocator.h"

#include <algorithm>
#include <functional>

#include "strata/core/error.h"
#include "tensor/allocator_buckets.h"

namespace strata::detail {

size_t CachingAllocator::FreeKeyHash::operator()(const FreeKey& k) const noexcept {
  return std::hash<void*>()(k.first) * 31 + std::hash<size_t>()(k.second);
}

CachingAllocator::CachingAllocator(AllocatorBackend& backend, std::string device_name)
    : backend_(backend), device_name_(std::move(device_name)) {
  spare_nodes_.reserve(kSpareNodes);  // deallocate never grows it
}

CachingAllocator::~CachingAllocator() {
  std::vector<void*> blocks;
  std::vector<Event> events;
  {
    std::lock_guard<std::mutex> lock(mu_);
    blocks = take_cached();
    events.swap(event_pool_);
  }
  if (!blocks.empty()) backend_.free_blocks(blocks);
  for (Event e : events) backend_.destroy_event(e);
}

void* CachingAllocator::allocate(size_t nbytes, Stream stream) {
  const size_t size = allocator_block_size(nbytes);
  auto hand_out = [&](void* p) {  // under mu_
    if (spare_nodes_.empty()) {
      in_use_.emplace(p, Block{size, stream, {}, {}, false});
    } else {  // a node of an earlier block: no heap allocation on the hot path
      auto node = std::move(spare_nodes_.back());
      spare_nodes_.pop_back();
      node.key() = p;
      node.mapped() = Block{size, stream, {}, {}, false};
      in_use_.insert(std::move(node));
    }
    stats_.in_use_bytes += size;
    stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
    return p;
  };
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.requests;
    if (!pending_.empty()) poll_pending();
    auto it = free_lists_.find({stream, size});
    if (it != free_lists_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      stats_.cached_bytes -= size;
      return hand_out(p);
    }
  }
  // malloc, and on failure the cache's release and one retry, run without the lock.
  void* p = backend_.malloc(size);
  if (p == nullptr) {
    std::vector<void*> blocks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      poll_pending();
      blocks = take_cached();
    }
    if (!blocks.empty()) backend_.free_blocks(blocks);
    p = backend_.malloc(size);
  }
  if (p == nullptr) {
    AllocatorStats s;
    {
      std::lock_guard<std::mutex> lock(mu_);
      s = stats_;
    }
    const std::string waiting =
        s.pending_bytes == 0 ? "" : ", " + std::to_string(s.pending_bytes) + " bytes waiting for other streams";
    STRATA_FAIL("out of memory on ", device_name_, ": requested ", nbytes, " bytes, ", backend_.free_memory(),
                " after releasing strata's cache (", s.in_use_bytes, " bytes in use by strata tensors", waiting,
                "): ", backend_.malloc_error());
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.system_allocs;
  return hand_out(p);
}

void CachingAllocator::deallocate(void* block) noexcept {
  if (block == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = in_use_.find(block);
  if (it == in_use_.end()) return;  // not from this allocator: nothing safe to do with it
  auto node = in_use_.extract(it);
  Block& b = node.mapped();
  stats_.in_use_bytes -= b.size;
  if (b.uses.empty() && b.events.empty() && !b.failed) {  // the common case: reusable now
    push_free(block, b);
    if (spare_nodes_.size() < kSpareNodes) spare_nodes_.push_back(std::move(node));
    return;
  }
  // Each other stream's work queued so far must finish before the block is reused.
  for (Stream s : b.uses) {
    Event e = b.failed ? nullptr : pooled_event();
    if (e == nullptr) {
      b.failed = true;
      break;
    }
    b.events.push_back(e);  // a failed record leaves it in an unknown state: never pooled again
    if (!backend_.record_event(e, s)) b.failed = true;
  }
  b.uses.clear();
  stats_.pending_bytes += b.size;
  const bool failed = b.failed;
  (failed ? stuck_ : pending_).push_back({block, std::move(b)});
}

bool CachingAllocator::record_stream(void* block, Stream stream) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = in_use_.find(block);
  if (it == in_use_.end()) return false;
  Block& b = it->second;
  if (stream != b.stream && std::find(b.uses.begin(), b.uses.end(), stream) == b.uses.end()) b.uses.push_back(stream);
  return true;
}

void CachingAllocator::retire_stream(Stream stream) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [ptr, b] : in_use_) {
    auto u = std::find(b.uses.begin(), b.uses.end(), stream);
    if (u == b.uses.end()) continue;
    b.uses.erase(u);
    Event e = b.failed ? nullptr : pooled_event();
    if (e == nullptr) {
      b.failed = true;
      continue;
    }
    b.events.push_back(e);
    if (!backend_.record_event(e, stream)) b.failed = true;
  }
}

AllocatorStats CachingAllocator::stats() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!pending_.empty()) poll_pending();
  return stats_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_in_use_bytes = stats_.in_use_bytes;
}

void CachingAllocator::empty_cache() {
  std::vector<void*> blocks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    poll_pending();
    blocks = take_cached();
  }
  if (!blocks.empty()) backend_.free_blocks(blocks);
}

void CachingAllocator::poll_pending() {
  std::erase_if(pending_, [&](Pending& p) {
    std::vector<Event>& events = p.block.events;
    while (!events.empty()) {
      const AllocatorBackend::EventStatus st = backend_.query_event(events.back());
      if (st == AllocatorBackend::EventStatus::NotReady) return false;
      if (st == AllocatorBackend::EventStatus::Failed) {
        // The stream's work may never end, or end after writing the block: keep it for good
        // (the failed event goes with it, never back to the pool).
        p.block.failed = true;
        stuck_.push_back(std::move(p));
        return true;
      }
      event_pool_.push_back(events.back());
      events.pop_back();
    }
    stats_.pending_bytes -= p.block.size;
    push_free(p.ptr, p.block);
    return true;
  });
}

std::vector<void*> CachingAllocator::take_cached() {
  std::vector<void*> blocks;
  for (auto& [key, list] : free_lists_) blocks.insert(blocks.end(), list.begin(), list.end());
  free_lists_.clear();
  stats_.cached_bytes = 0;
  return blocks;
}

AllocatorBackend::Event CachingAllocator::pooled_event() {
  if (event_pool_.empty()) return backend_.create_event();
  Event e = event_pool_.back();
  event_pool_.pop_back();
  return e;
}

void CachingAllocator::push_free(void* ptr, const Block& b) {
  free_lists_[{b.stream, b.size}].push_back(ptr);
  stats_.cached_bytes += b.size;
}

}  // namespace strata::detail
