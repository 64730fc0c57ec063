// The caching allocator's policy (src/tensor/caching_allocator.h) on a scripted device: no
// GPU needed. Blocks are fake addresses; events complete or fail when a test says so.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "strata/tensor/cuda.h"
#include "tensor/allocator_buckets.h"
#include "tensor/caching_allocator.h"
#include "test_util.h"

namespace strata {
namespace {

using detail::AllocatorBackend;
using detail::CachingAllocator;
using Stream = AllocatorBackend::Stream;
using Event = AllocatorBackend::Event;

Stream stream(uintptr_t id) { return reinterpret_cast<Stream>(id); }
const Stream kCompute = nullptr;  // the device's default stream, as strata's CUDA code uses
const Stream kComm = stream(0xC0);
const Stream kPrefetch = stream(0xD0);

// A device whose memory holds `capacity` bytes and whose events complete (or fail) only
// when the test finishes (or breaks) the stream they were recorded on.
class ScriptedDevice final : public AllocatorBackend {
 public:
  enum class State { NotReady, Complete, Failed };
  struct EventInfo {
    Stream stream = nullptr;
    State state = State::Complete;  // never recorded: complete, as a fresh CUDA event
  };

  size_t capacity = size_t{1} << 30;
  size_t live_bytes = 0;
  std::map<void*, size_t> live;  // malloc'd and not freed
  int mallocs = 0, failed_mallocs = 0, frees = 0, events_created = 0, events_destroyed = 0, records = 0;
  bool fail_records = false;
  bool fail_event_creation = false;
  std::map<Event, EventInfo> events;
  // Set to check that free_blocks runs without the allocator's lock held.
  CachingAllocator* probe = nullptr;
  bool lock_was_held = false;
  std::vector<std::thread> probes;

  ScriptedDevice() = default;
  ~ScriptedDevice() override {
    for (std::thread& t : probes) t.join();
  }

  void* malloc(size_t bytes) override {
    if (live_bytes + bytes > capacity) {
      ++failed_mallocs;
      return nullptr;
    }
    ++mallocs;
    next_ += 0x100000;
    void* p = reinterpret_cast<void*>(next_);
    live[p] = bytes;
    live_bytes += bytes;
    return p;
  }
  void free_blocks(const std::vector<void*>& blocks) noexcept override {
    if (probe != nullptr) {
      // stats() from another thread finishes at once unless this thread holds the lock.
      auto done = std::make_shared<std::atomic<bool>>(false);
      probes.emplace_back([c = probe, done] {
        (void)c->stats();
        *done = true;
      });
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (!*done && std::chrono::steady_clock::now() < until) std::this_thread::yield();
      if (!*done) lock_was_held = true;
    }
    for (void* p : blocks) {
      auto it = live.find(p);
      if (it == live.end()) continue;
      live_bytes -= it->second;
      live.erase(it);
      ++frees;
    }
  }
  Event create_event() noexcept override {
    if (fail_event_creation) return nullptr;
    ++events_created;
    Event e = reinterpret_cast<Event>(static_cast<uintptr_t>(0xE0000 + events_created));
    events[e] = {};
    return e;
  }
  void destroy_event(Event e) noexcept override {
    ++events_destroyed;
    events.erase(e);
  }
  bool record_event(Event e, Stream s) noexcept override {
    if (fail_records) return false;
    ++records;
    events[e] = {s, State::NotReady};
    return true;
  }
  EventStatus query_event(Event e) noexcept override {
    switch (events.at(e).state) {
      case State::Complete: return EventStatus::Complete;
      case State::NotReady: return EventStatus::NotReady;
      case State::Failed: return EventStatus::Failed;
    }
    return EventStatus::Failed;
  }
  std::string free_memory() override {
    return std::to_string(capacity - live_bytes) + " bytes free of " + std::to_string(capacity);
  }
  std::string malloc_error() override { return "scripted: out of memory"; }

  // Every event recorded on `s` so far completes (or fails); later records do not.
  void finish(Stream s, State to = State::Complete) {
    for (auto& [e, info] : events)
      if (info.stream == s && info.state == State::NotReady) info.state = to;
  }
  int not_ready_events() const {
    int n = 0;
    for (const auto& [e, info] : events) n += info.state == State::NotReady;
    return n;
  }

 private:
  uintptr_t next_ = 0;
};

const size_t kBlock = detail::allocator_block_size(4000);

TEST(CachingAllocator, BlockWithoutOtherStreamsIsReusedAtOnce) {
  ScriptedDevice dev;
  CachingAllocator cache(dev, "fake:0");
  void* p = cache.allocate(4000, kCompute);
  cache.deallocate(p);
  EXPECT_EQ(cache.allocate(4000, kCompute), p);
  EXPECT_EQ(dev.mallocs, 1);
  EXPECT_EQ(dev.events_created, 0);  // the hot path makes no event
  const AllocatorStats s = cache.stats();
  EXPECT_EQ(s.requests, 2u);
  EXPECT_EQ(s.system_allocs, 1u);
  EXPECT_EQ(s.in_use_bytes, kBlock);
  EXPECT_EQ(s.cached_bytes, 0u);
  EXPECT_EQ(s.pending_bytes, 0u);
}

TEST(CachingAllocator, FreeListsAreKeptPerStream) {
  ScriptedDevice dev;
  CachingAllocator cache(dev, "fake:0");
  void* p = cache.allocate(4000, kCompute);
  cache.deallocate(p);
  void* q = cache.allocate(4000, kPrefetch);  // another stream's allocation does not take it
  EXPECT_NE(q, p);
  cache.deallocate(q);
  EXPECT_EQ(cache.allocate(4000, kCompute), p);
  EXPECT_EQ(cache.allocate(4000, kPrefetch), q);
}

TEST(CachingAllocator, RecordedBlockWaitsForEveryStreamThatUsedIt) {
  ScriptedDevice dev;
  CachingAllocator cache(dev, "fake:0");
  void* p = cache.allocate(4000, kCompute);
  EXPECT_TRUE(cache.record_stream(p, kComm));
  EXPECT_TRUE(cache.record_stream(p, kPrefetch));
  EXPECT_TRUE(cache.record_stream(p, kComm));     // once per stream
  EXPECT_TRUE(cache.record_stream(p, kCompute));  // its own stream needs no event
  cache.deallocate(p);
  EXPECT_EQ(dev.records, 2);
  AllocatorStats s = cache.stats();
  EXPECT_EQ(s.in_use_bytes, 0u);
  EXPECT_EQ(s.cached_bytes, 0u);
  EXPECT_EQ(s.pending_bytes, kBlock);

  void* q = cache.allocate(4000, kCompute);  // p is pending: a new block
  EXPECT_NE(q, p);
  dev.finish(kComm);
  void* r = cache.allocate(4000, kCompute);  // the prefetch stream may still use p
  EXPECT_NE(r, p);
  EXPECT_EQ(cache.stats().pending_bytes, kBlock);
  dev.finish(kPrefetch);
  s = cache.stats();
  EXPECT_EQ(s.pending_bytes, 0u);
  EXPECT_EQ(s.cached_bytes, kBlock);
  EXPECT_EQ(cache.allocate(4000, kCompute), p);
  EXPECT_EQ(dev.mallocs, 3);
}

// A record applies to work queued up to the free: a stream's earlier completion (before the
// free) does not release the block.
TEST(CachingAllocator, EventIsRecordedAtTheFree) {
  ScriptedDevice dev;
  CachingAllocator cache(dev, "fake:0");
  void* p = cache.allocate(100, kCompute);
  cache.record_stream(p, kComm);
  dev.finish(kComm);  // nothing recorded yet
  EXPECT_EQ(dev.records, 0);
  cache.deallocate(p);
  EXPECT_NE(cache.allocate(100, kCompute), p);
  dev.finish(kComm);
  EXPECT_EQ(cache.allocate(100, kCompute), p);
}

TEST(CachingAllocator, EventsArePooled) {
  ScriptedDevice dev;
  CachingAllocator cache(dev, "fake:0");
  for (int i = 0; i < 10; ++i) {
    void* p = cache.allocate(100, kCompute);
    cache.record_stream(p, kComm);
    cache.deallocate(p);
    dev.finish(kComm);
    (void)cache.stats();  // polls: the event goes back to the pool
  }
  EXPECT_EQ(dev.records, 10);
  EXPECT_EQ(dev.events_created, 1);
  EXPECT_EQ(dev.mallocs, 1);
}

TEST(CachingAllocator, FailedEventKeepsTheBlockForever) {
  ScriptedDevice dev;
  CachingAllocator cache(dev, "fake:0");
  void* p = cache.allocate(4000, kCompute);
  cache.record_stream(p, kComm);
  cache.deallocate(p);
  dev.finish(kComm, ScriptedDevice::State::Failed);
  for (int i = 0; i < 5; ++i) {
    void* q = cache.allocate(4000, kCompute);
    EXPECT_NE(q, p);
    cache.deallocate(q);
  }
  cache.empty_cache();
  EXPECT_EQ(dev.live.count(p), 1u);  // never freed either: a kernel may still write it
  const AllocatorStats s = cache.stats();
  EXPECT_EQ(s.pending_bytes, kBlock);
  EXPECT_EQ(s.cached_bytes, 0u);
  EXPECT_EQ(s.in_use_bytes, 0u);
}

TEST(CachingAllocator, FailedRecordOrEventCreationKeepsTheBlockForever) {
  ScriptedDevice dev;
  CachingAllocator cache(dev, "fake:0");
  void* p = cache.allocate(100, kCompute);
  void* q = cache.allocate(100, kCompute);
  cache.record_stream(p, kComm);
  cache.record_stream(q, kComm);
  dev.fail_records = true;
  EXPECT_NO_THROW(cache.deallocate(p));
  dev.fail_records = false;
  dev.fail_event_creation = true;
  EXPECT_NO_THROW(cache.deallocate(q));
  dev.fail_event_creation = false;
  dev.finish(kComm);
  for (int i = 0; i < 3; ++i) {
    void* r = cache.allocate(100, kCompute);
    EXPECT_NE(r, p);
    EXPECT_NE(r, q);
  }
  EXPECT_EQ(cache.stats().pending_bytes, 2 * detail::allocator_block_size(100));
}

TEST(CachingAllocator, RecordStreamOfUnknownMemoryDoesNothing) {
  ScriptedDevice dev;
  CachingAllocator cache(dev, "fake:0");
  int host = 0;
  EXPECT_FALSE(cache.record_stream(&host, kComm));
  void* p = cache.allocate(100, kCompute);
  cache.deallocate(p);
  EXPECT_FALSE(cache.record_stream(p, kComm));  // cached, not in use
  cache.deallocate(&host);                      // not ours: ignored
  EXPECT_EQ(cache.stats().cached_bytes, detail::allocator_block_size(100));
}

// A stream about to be destroyed: in-use blocks it used wait for an event recorded now, and
// their free records nothing on the dead stream.
TEST(CachingAllocator, RetiredStreamBecomesAnEvent) {
  ScriptedDevice dev;
  CachingAllocator cache(dev, "fake:0");
  void* p = cache.allocate(100, kCompute);
  void* other = cache.allocate(100, kCompute);
  cache.record_stream(p, kComm);
  cache.retire_stream(kComm);
  EXPECT_EQ(dev.records, 1);  // for p only
  cache.deallocate(p);
  cache.deallocate(other);
  EXPECT_EQ(dev.records, 1);
  EXPECT_EQ(cache.stats().pending_bytes, detail::allocator_block_size(100));
  EXPECT_EQ(cache.allocate(100, kCompute), other);
  EXPECT_EQ(dev.mallocs, 2);
  EXPECT_NE(cache.allocate(100, kCompute), p);
  dev.finish(kComm);
  EXPECT_EQ(cache.allocate(100, kCompute), p);
}

TEST(CachingAllocator, EmptyCacheReleasesOnlyCompletedBlocksWithoutTheLock) {
  ScriptedDevice dev;
  CachingAllocator cache(dev, "fake:0");
  void* idle = cache.allocate(100, kCompute);
  void* done = cache.allocate(100, kCompute);
  void* busy = cache.allocate(100, kCompute);
  cache.record_stream(done, kComm);
  cache.record_stream(busy, kPrefetch);
  cache.deallocate(idle);
  cache.deallocate(done);
  cache.deallocate(busy);
  dev.finish(kComm);
  dev.probe = &cache;
  cache.empty_cache();
  dev.probe = nullptr;
  EXPECT_FALSE(dev.lock_was_held);
  EXPECT_EQ(dev.frees, 2);
  EXPECT_EQ(dev.live.count(busy), 1u);
  const AllocatorStats s = cache.stats();
  EXPECT_EQ(s.cached_bytes, 0u);
  EXPECT_EQ(s.pending_bytes, detail::allocator_block_size(100));
  dev.finish(kPrefetch);
  cache.empty_cache();
  EXPECT_EQ(dev.live_bytes, 0u);
  EXPECT_EQ(cache.stats().pending_bytes, 0u);
}

TEST(CachingAllocator, EmptyCacheAfterResetPeak) {
  ScriptedDevice dev;
  CachingAllocator cache(dev, "fake:0");
  cache.reset_peak();
  EXPECT_NO_THROW(cache.empty_cache());
  void* p = cache.allocate(4000, kCompute);
  void* q = cache.allocate(4000, kCompute);
  cache.deallocate(q);
  EXPECT_EQ(cache.stats().peak_in_use_bytes, 2 * kBlock);
  cache.reset_peak();
  EXPECT_EQ(cache.stats().peak_in_use_bytes, kBlock);
  EXPECT_NO_THROW(cache.empty_cache());
  EXPECT_EQ(cache.stats().cached_bytes, 0u);
  cache.deallocate(p);
}

// Out of memory: every reusable block (completed pending ones included) goes back to the
// device and the allocation is retried once; then the error names the request, the free
// memory and what strata holds.
TEST(CachingAllocator, OutOfMemoryReleasesTheCacheRetriesOnceThenNamesTheBytes) {
  ScriptedDevice dev;
  const size_t mib = size_t{1} << 20;
  dev.capacity = 4 * mib;
  CachingAllocator cache(dev, "fake:0");
  void* cached = cache.allocate(mib, kCompute);
  void* completed = cache.allocate(mib, kCompute);
  void* waiting = cache.allocate(mib, kCompute);
  void* held = cache.allocate(mib, kCompute);
  cache.record_stream(completed, kComm);
  cache.record_stream(waiting, kPrefetch);
  cache.deallocate(cached);
  cache.deallocate(completed);
  cache.deallocate(waiting);
  dev.finish(kComm);
  dev.probe = &cache;
  void* big = cache.allocate(2 * mib, kCompute);  // fits once the two reusable blocks are gone
  dev.probe = nullptr;
  EXPECT_FALSE(dev.lock_was_held);
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(dev.failed_mallocs, 1);
  EXPECT_EQ(dev.live.count(cached) + dev.live.count(completed), 0u);
  EXPECT_EQ(dev.live.count(waiting), 1u);  // the prefetch stream may still use it

  const int failed_before = dev.failed_mallocs;
  strata::testing::expect_error_mentions(
      [&] { (void)cache.allocate(3 * mib, kCompute); },
      {"out of memory on fake:0", "requested " + std::to_string(3 * mib) + " bytes", "0 bytes free of",
       "after releasing strata's cache", std::to_string(3 * mib) + " bytes in use by strata tensors",
       std::to_string(mib) + " bytes waiting for other streams", "scripted: out of memory"});
  EXPECT_EQ(dev.failed_mallocs, failed_before + 2);  // one retry, no more
  const AllocatorStats s = cache.stats();
  EXPECT_EQ(s.in_use_bytes, 3 * mib);
  EXPECT_EQ(s.cached_bytes, 0u);
  EXPECT_EQ(s.pending_bytes, mib);
  cache.deallocate(big);
  cache.deallocate(held);
}

// Random allocations, frees, records and stream completions against a model: a freed block
// that streams used is never handed out before each of them finished the work queued before
// its free, and in use + cached + pending is always what the device has handed out.
TEST(CachingAllocator, StatsStayConsistentAndPendingBlocksAreNeverHandedOut) {
  ScriptedDevice dev;
  CachingAllocator cache(dev, "fake:0");
  const Stream streams[] = {kComm, kPrefetch};
  std::map<void*, size_t> held;              // block -> requested bytes
  std::map<void*, std::set<Stream>> used;    // in-use block -> recorded streams
  std::map<void*, std::set<Stream>> unsafe;  // freed block -> streams yet to finish
  uint64_t state = 12345;
  auto next = [&](uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % n;
  };
  for (int step = 0; step < 3000; ++step) {
    const uint64_t op = next(10);
    if (op < 4 || held.empty()) {
      const size_t bytes = 512 * (1 + next(4));
      void* p = cache.allocate(bytes, kCompute);
      ASSERT_EQ(held.count(p), 0u) << "step " << step;
      ASSERT_EQ(unsafe.count(p), 0u) << "handed out while another stream may use it, step " << step;
      held[p] = bytes;
    } else {
      auto it = held.begin();
      std::advance(it, static_cast<long>(next(held.size())));
      void* p = it->first;
      if (op < 6) {
        const Stream s = streams[next(2)];
        ASSERT_TRUE(cache.record_stream(p, s));
        used[p].insert(s);
      } else if (op < 9) {
        if (!used[p].empty()) unsafe[p] = used[p];
        used.erase(p);
        held.erase(it);
        cache.deallocate(p);
      } else {
        const Stream s = streams[next(2)];
        dev.finish(s);
        for (auto u = unsafe.begin(); u != unsafe.end();) {
          u->second.erase(s);
          u = u->second.empty() ? unsafe.erase(u) : std::next(u);
        }
      }
    }
    if (step % 500 == 499) cache.empty_cache();
    const AllocatorStats s = cache.stats();
    size_t in_use = 0;
    for (const auto& [p, bytes] : held) in_use += detail::allocator_block_size(bytes);
    ASSERT_EQ(s.in_use_bytes, in_use) << "step " << step;
    ASSERT_EQ(s.in_use_bytes + s.cached_bytes + s.pending_bytes, dev.live_bytes) << "step " << step;
    ASSERT_LE(s.in_use_bytes, s.peak_in_use_bytes);
  }
  EXPECT_GT(dev.records, 50);
  EXPECT_LT(dev.events_created, dev.records);  // pooled
}

// The public entry: a CPU tensor is refused by name; CUDA memory strata did not allocate
// (a wrapped pointer, as from interop) is left alone.
TEST(CachingAllocator, PublicRecordStreamChecksTheTensor) {
  strata::testing::expect_error_mentions(
      [] {
        cuda::record_stream(ones({2, 3}), nullptr);
      },
      {"cuda::record_stream", "[2, 3]", "cpu"});
  std::vector<float> backing(4, 0.0f);
  Tensor wrapped = from_blob(backing.data(), {4}, DType::Float32, {}, Device::cuda(0));
  EXPECT_NO_THROW(cuda::record_stream(wrapped, nullptr));
}

}  // namespace
}  // namespace strata
