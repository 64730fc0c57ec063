#include "distributed/mpi/ring.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "distributed/env_settings.h"
#include "distributed/mpi/local_reduce.h"
#include "strata/core/error.h"

namespace strata::dist::mpi {
namespace {

// Tuned on the 2-core development machine (docs/performance.md): below ~kMinBytes MPI's
// own Iallreduce is as fast (it needs fewer messages); a segment of 256 KiB fits the L2
// cache beside the slice of data it is reduced into; 4 segments in flight each way keep
// the pipeline full without tying up much scratch.
constexpr int64_t kDefaultMinBytes = 256 << 10;
constexpr int64_t kDefaultSegmentBytes = 256 << 10;
constexpr int kDepth = 4;

int64_t min_bytes() {
  static const int64_t v = detail::env_count("STRATA_MPI_RING_MIN_BYTES", kDefaultMinBytes, "byte count");
  return v;
}

int64_t segment_bytes() {
  static const int64_t v =
      std::max<int64_t>(detail::env_count("STRATA_MPI_RING_SEGMENT_BYTES", kDefaultSegmentBytes, "byte count"), 64);
  return v;
}

// ------------------------------------------------------------------ scratch buffers

// Scratch memory is kept for reuse: fresh pages cost a fault each on first touch, which for
// a 64 MiB buffer is as slow as the transfer itself. At most kKeepBytes stay cached.
class Pool {
 public:
  static Pool& get() {
    static Pool* pool = new Pool;  // never destroyed: ops may release buffers at exit
    return *pool;
  }
  std::shared_ptr<std::byte> take(size_t bytes) {
    bytes = std::max<size_t>(bytes, 64);
    std::byte* p = nullptr;
    size_t cap = 0;
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto best = free_.end();
      for (auto it = free_.begin(); it != free_.end(); ++it)
        if (it->first >= bytes && (best == free_.end() || it->first < best->first)) best = it;
      if (best != free_.end()) {
        cap = best->first;
        p = best->second;
        free_bytes_ -= cap;
        free_.erase(best);
      }
    }
    if (p == nullptr) {
      cap = bytes;
      p = static_cast<std::byte*>(::operator new (cap, std::align_val_t{64}));
    }
    return std::shared_ptr<std::byte>(p, [cap](std::byte* q) { Pool::get().give(q, cap); });
  }

 private:
  static constexpr size_t kKeepBytes = size_t{256} << 20;
  void give(std::byte* p, size_t cap) {
    std::vector<std::pair<size_t, std::byte*>> drop;
    {
      std::lock_guard<std::mutex> lk(mu_);
      free_.emplace_back(cap, p);
      free_bytes_ += cap;
      // Over the cap: release the smallest first (the large ones are the costly ones).
      std::sort(free_.begin(), free_.end());
      while (free_bytes_ > kKeepBytes || free_.size() > 8) {
        drop.push_back(free_.front());
        free_bytes_ -= free_.front().first;
        free_.erase(free_.begin());
      }
    }
    for (auto& [c, q] : drop) ::operator delete (q, std::align_val_t{64});
  }
  std::mutex mu_;
  std::vector<std::pair<size_t, std::byte*>> free_;
  size_t free_bytes_ = 0;
};

// ------------------------------------------------------------------ the ring

// Units are numbered u = step * K + segment, in the order every rank sends and receives
// them; with one tag per op, MPI's in-order matching pairs the u-th send of rank r with
// the u-th receive of rank r+1.
class Ring {
 public:
  Ring(const RingPeers& g, int64_t seq, const RingArgs& a)
      : a_(a), n_(g.size), r_(g.rank), comm_(g.comm), esize_(element_size(a.type)) {
    tag_ = static_cast<int>(seq % static_cast<int64_t>(g.tag_ub));
    chunk_ = (a.count + n_ - 1) / n_;
    seg_ = std::max<int64_t>(1, segment_bytes() / static_cast<int64_t>(esize_));
    // A 2-rank all-gather is a single exchange with nothing to overlap it with: segments
    // only add messages (bench_collectives, 4 MiB on 2 ranks: ~0.8 of raw MPI's busbw with
    // 256 KiB segments, ~0.97 with one message).
    if (a.kind == RingKind::AllGather && n_ == 2) seg_ = std::max<int64_t>(seg_, chunk_);
    segs_ = std::max<int64_t>(1, (chunk_ + seg_ - 1) / seg_);
    // Steps first_step_ .. last: reduce-scatter 0..N-2, all-gather N-1..2N-3.
    first_step_ = a.kind == RingKind::AllGather ? n_ - 1 : 0;
    const int64_t steps = a.kind == RingKind::AllReduce ? 2 * (n_ - 1) : n_ - 1;
    units_ = steps * segs_;
    if (a.kind != RingKind::AllGather)
      scratch_ = Pool::get().take(static_cast<size_t>(kDepth * std::min(seg_, chunk_)) * esize_);
    if (a.kind == RingKind::ReduceScatter) {
      out_ = a.out;
      if (n_ > 2) {
        // Partial sums of the chunks this rank forwards (not in `in`: it is read only).
        acc_holder_ = Pool::get().take(static_cast<size_t>(a.count) * esize_);
        acc_ = acc_holder_.get();
      }
    } else {
      acc_ = static_cast<std::byte*>(a.out);
    }
    if (a.kind == RingKind::AllGather) {
      // The own chunk is sent from `in` and copied into place once the op is done. Copying
      // it first and sending it from `out` cost 20-30 us more per 1 MiB op on 2 ranks
      // (bench_collectives): the peer then reads lines this core has just written.
      const Span mine = segment_range(r_);
      std::byte* dst = at(acc_, mine.begin);
      if (mine.len > 0 && dst != a.in) own_copy_ = static_cast<size_t>(mine.len) * esize_;
    }
    recv_.fill(MPI_REQUEST_NULL);
    send_.fill(MPI_REQUEST_NULL);
  }

  PollResult poll() {
    bool any = false;
    for (;;) {
      bool moved = false;
      while (recv_done_ < recv_posted_ && test(recv_[slot(recv_done_)], recv_done_)) {
        if (step_of(recv_done_) < n_ - 1) reduce(recv_done_);
        ++recv_done_;
        moved = true;
      }
      while (send_done_ < send_posted_ && test(send_[slot(send_done_)], -1)) {
        ++send_done_;
        moved = true;
      }
      while (recv_posted_ < units_ && recv_posted_ - recv_done_ < kDepth && may_receive(recv_posted_)) {
        post_recv(recv_posted_++);
        moved = true;
      }
      while (send_posted_ < units_ && send_posted_ - send_done_ < kDepth &&
             (send_posted_ < segs_ || recv_done_ > send_posted_ - segs_)) {
        post_send(send_posted_++);
        moved = true;
      }
      if (!moved) break;
      any = true;
    }
    if (recv_done_ == units_ && send_done_ == units_) {
      if (own_copy_ > 0) {
        std::memcpy(at(acc_, chunk_begin(r_)), a_.in, own_copy_);
        own_copy_ = 0;
      }
      return PollResult::Done;
    }
    return any ? PollResult::Progressed : PollResult::Waiting;
  }

  // The neighbours this rank is stuck on (for a timeout's message): the previous rank while
  // a receive has not arrived, the next one while a posted send has not been delivered. A
  // send not yet posted waits for a receive, so it names nobody of its own.
  std::vector<int> waiting_on() const {
    std::vector<int> peers;
    if (recv_done_ < units_) peers.push_back(mod(r_ - 1));
    if (send_done_ < send_posted_) peers.push_back(mod(r_ + 1));
    return peers;
  }

 private:
  struct Span {
    int64_t begin, len;
  };
  static int slot(int64_t u) { return static_cast<int>(u % kDepth); }
  int mod(int64_t x) const { return static_cast<int>(((x % n_) + n_) % n_); }
  int64_t step_of(int64_t u) const { return first_step_ + u / segs_; }
  int64_t chunk_begin(int j) const { return std::min(static_cast<int64_t>(j) * chunk_, a_.count); }
  Span segment_range(int j) const {
    const int64_t b = chunk_begin(j);
    return {b, std::min(b + chunk_, a_.count) - b};
  }
  Span segment(int j, int64_t k) const {
    const int64_t b = chunk_begin(j), e = std::min(b + chunk_, a_.count);
    const int64_t lo = std::min(b + k * seg_, e), hi = std::min(lo + seg_, e);
    return {lo, hi - lo};
  }
  // Reduce-scatter step s: send chunk r-s-1, receive chunk r-s-2. All-gather step t = s-(N-1):
  // send chunk r-t, receive chunk r-t-1.
  int send_chunk(int64_t s) const { return s < n_ - 1 ? mod(r_ - s - 1) : mod(r_ - (s - (n_ - 1))); }
  int recv_chunk(int64_t s) const { return s < n_ - 1 ? mod(r_ - s - 2) : mod(r_ - (s - (n_ - 1)) - 1); }
  Span send_span(int64_t u) const { return segment(send_chunk(step_of(u)), u % segs_); }
  Span recv_span(int64_t u) const { return segment(recv_chunk(step_of(u)), u % segs_); }
  std::byte* at(void* base, int64_t element) const {
    return static_cast<std::byte*>(base) + element * static_cast<int64_t>(esize_);
  }
  const std::byte* at(const void* base, int64_t element) const {
    return static_cast<const std::byte*>(base) + element * static_cast<int64_t>(esize_);
  }
  std::byte* scratch(int64_t u) const { return at(scratch_.get(), slot(u) * std::min(seg_, chunk_)); }

  // An all-gather receive lands in the region this rank sent from N-1 steps earlier:
  // that send must have completed.
  bool may_receive(int64_t u) const {
    return step_of(u) < n_ - 1 || first_step_ > 0 || send_done_ > u - (n_ - 1) * segs_;
  }

  void post_recv(int64_t u) {
    const Span sp = recv_span(u);
    if (sp.len == 0) return;  // the sender skips the same unit
    void* dst = step_of(u) < n_ - 1 ? static_cast<void*>(scratch(u)) : static_cast<void*>(at(acc_, sp.begin));
    STRATA_MPI(MPI_Irecv(dst, static_cast<int>(sp.len), a_.type, mod(r_ - 1), tag_, comm_, &recv_[slot(u)]));
  }

  void post_send(int64_t u) {
    const Span sp = send_span(u);
    if (sp.len == 0) return;
    // Step 0 of a reduction sends from `in`; so does an all-gather's first step (its own
    // chunk; `in` holds that chunk only).
    const void* src = static_cast<const void*>(at(acc_, sp.begin));
    if (step_of(u) == 0) src = at(a_.in, sp.begin);
    else if (own_copy_ > 0 && u < segs_) src = at(a_.in, sp.begin - chunk_begin(r_));
    STRATA_MPI(MPI_Isend(src, static_cast<int>(sp.len), a_.type, mod(r_ + 1), tag_, comm_, &send_[slot(u)]));
  }

  // Tests one request; for a receive (u >= 0) also checks the length that arrived.
  bool test(MPI_Request& req, int64_t u) {
    if (req == MPI_REQUEST_NULL) return true;
    int flag = 0;
    MPI_Status st;
    STRATA_MPI(MPI_Test(&req, &flag, &st));
    if (!flag || u < 0) return flag != 0;
    int got = 0;
    STRATA_MPI(MPI_Get_count(&st, a_.type, &got));
    const Span sp = recv_span(u);
    STRATA_CHECK(got == sp.len, "ring: rank ", mod(r_ - 1), " sent ", got, " elements where ", sp.len,
                 " were expected (do all ranks pass tensors of ", a_.count, " elements?)");
    return true;
  }

  // The received partial sum combined with this rank's contribution; the last
  // reduce-scatter step writes the finished chunk (r) to `out` for reduce_scatter.
  void reduce(int64_t u) {
    const Span sp = recv_span(u);
    if (sp.len == 0) return;
    const bool last = step_of(u) == n_ - 2;
    void* dst = (last && out_) ? static_cast<void*>(at(out_, sp.begin - chunk_begin(r_)))
                               : static_cast<void*>(at(acc_, sp.begin));
    combine(a_.type, a_.op, dst, scratch(u), at(a_.in, sp.begin), sp.len);
  }

  RingArgs a_;
  int n_, r_;
  MPI_Comm comm_;
  size_t esize_;
  int tag_ = 0;
  int64_t chunk_ = 0, seg_ = 1, segs_ = 1, units_ = 0;
  std::shared_ptr<std::byte> scratch_, acc_holder_;
  std::byte* acc_ = nullptr;  // partial sums and the all-gathered result
  size_t own_copy_ = 0;       // all-gather: bytes of `in` still to copy into its place in `out`
  void* out_ = nullptr;       // reduce_scatter's result chunk
  int64_t first_step_ = 0;
  std::array<MPI_Request, kDepth> recv_{}, send_{};
  int64_t recv_posted_ = 0, recv_done_ = 0, send_posted_ = 0, send_done_ = 0;
};

}  // namespace

bool use_ring(int64_t bytes, int group_size) { return group_size > 1 && bytes >= min_bytes(); }

PhasePoll make_ring(const RingPeers& peers, int64_t seq, const RingArgs& args) {
  STRATA_CHECK(peers.comm != MPI_COMM_NULL, "ring: no ring communicator");
  auto ring = std::make_shared<Ring>(peers, seq, args);
  return [ring] { return ring->poll(); };
}

// The flat ring over the whole group: its ranks are the group's, so a timeout can name the
// neighbours it is stuck on (Op::waiting_on).
void start_ring(Op& op, const RingArgs& args) {
  STRATA_CHECK(op.group && op.group->ring != MPI_COMM_NULL, "ring: the group has no ring communicator");
  const GroupState& g = *op.group;
  auto ring = std::make_shared<Ring>(RingPeers{g.ring, g.rank, g.size, g.tag_ub}, op.seq, args);
  op.poll = [ring](Op&) { return ring->poll(); };
  op.waiting_on = [ring] { return ring->waiting_on(); };
}

std::shared_ptr<std::byte> take_scratch(size_t bytes) { return Pool::get().take(bytes); }

}  // namespace strata::dist::mpi
