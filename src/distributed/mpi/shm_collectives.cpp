#include "distributed/mpi/shm_collectives.h"

#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "distributed/mpi/local_reduce.h"
#include "distributed/mpi/shm_arena.h"
#include "strata/core/error.h"

namespace strata::dist::mpi {
namespace {

constexpr auto kAcq = std::memory_order_acquire;
constexpr auto kRel = std::memory_order_release;

class ShmOp {
 public:
  ShmOp(std::shared_ptr<ShmArena> arena, const ShmArgs& a)
      : ar_(std::move(arena)),
        a_(a),
        n_(ar_->size()),
        me_(ar_->rank()),
        esize_(static_cast<int64_t>(element_size(a.type))) {
    ticket_ = ar_->issued++;
    c_ = (a.count + n_ - 1) / n_;
    const int64_t bytes = a.count * esize_;
    const ShmConfig& cfg = ar_->config();
    cma_ = cfg.cma && bytes >= (a.kind == RingKind::AllGather ? cfg.cma_gather_min : cfg.cma_reduce_min);
    const int64_t slot_elems = ar_->slot_payload() / esize_;
    sig_ = {ticket_, a.count, static_cast<int32_t>(a.kind), static_cast<int32_t>(a.op), esize_};
    // Reduce-scatter rounds carry N-1 segments (one per other chunk), 64-byte aligned.
    seg_rs_ = std::max<int64_t>(1, slot_elems / (n_ - 1));
    if (seg_rs_ * esize_ >= 64) seg_rs_ -= seg_rs_ % (64 / esize_);
    seg_ag_ = slot_elems;
    rounds_rs_ = a.kind == RingKind::AllGather ? 0 : (c_ + seg_rs_ - 1) / seg_rs_;
    rounds_ag_ = a.kind == RingKind::ReduceScatter ? 0 : (c_ + seg_ag_ - 1) / seg_ag_;
    rounds_ = rounds_rs_ + rounds_ag_;
    rd_.assign(static_cast<size_t>(n_), 0);
    done_.assign(static_cast<size_t>(n_), false);
    if (a.kind == RingKind::AllGather) {
      std::byte* dst = at(a.out, begin(me_));
      if (len(me_) > 0 && dst != a.in) own_copy_ = true;
    }
  }

  PollResult poll() {
    STRATA_CHECK(!ar_->failed, "an earlier shared-memory collective of this group failed on this rank");
    if (ar_->completed != ticket_) return PollResult::Waiting;  // an earlier op of the group runs
    bool any = false;
    if (!started_) {
      started_ = true;
      any = true;
      if (cma_) {
        ar_->addr(me_).store(reinterpret_cast<uint64_t>(a_.in), std::memory_order_relaxed);
        ar_->ready(me_).store(phase(1), kRel);
      } else {
        base_ = ar_->pub(me_).load(std::memory_order_relaxed);
      }
    }
    const bool finished = cma_ ? poll_cma(any) : poll_slots(any);
    if (!finished) return any ? PollResult::Progressed : PollResult::Waiting;
    if (own_copy_) std::memcpy(at(a_.out, begin(me_)), a_.in, static_cast<size_t>(len(me_) * esize_));
    ++ar_->completed;
    return PollResult::Done;
  }

 private:
  int64_t begin(int j) const { return std::min(static_cast<int64_t>(j) * c_, a_.count); }
  int64_t len(int j) const { return std::min(begin(j) + c_, a_.count) - begin(j); }
  std::byte* at(void* base, int64_t element) const { return static_cast<std::byte*>(base) + element * esize_; }
  const std::byte* at(const void* base, int64_t element) const {
    return static_cast<const std::byte*>(base) + element * esize_;
  }
  // Elements [lo, lo + seg) of a chunk of `total`, clipped.
  static int64_t clip(int64_t total, int64_t lo, int64_t seg) { return std::clamp<int64_t>(total - lo, 0, seg); }
  uint64_t phase(int p) const { return 2 * ticket_ + static_cast<uint64_t>(p); }
  // Where rank p puts its segment of chunk j in a reduce-scatter piece (its own chunk is skipped).
  int64_t rs_offset(int p, int j) const { return (j < p ? j : j - 1) * seg_rs_; }

  // dst = src(0) op src(1) op ... op src(N-1), in rank order. In place (all-reduce), dst
  // is this rank's own contribution: the partial results before it is consumed go to
  // scratch (the last slot_bytes of the arena's scratch; n <= slot_bytes / esize).
  template <class Src>
  void reduce_in_order(void* dst, int64_t n, Src src) const {
    void* acc = dst;
    if (me_ >= 2 && dst == src(me_)) acc = ar_->scratch(scratch_bytes()) + (n_ - 1) * ar_->config().slot_bytes;
    const void* prev = src(0);
    for (int p = 1; p < n_; ++p) {
      if (p == me_) acc = dst;  // this step consumes dst's own value and writes it
      combine(a_.type, a_.op, acc, prev, src(p), n);
      prev = acc;
    }
  }
  // The arena's scratch: N-1 pieces of peers' data (CMA) and an accumulator.
  size_t scratch_bytes() const { return static_cast<size_t>(n_) * static_cast<size_t>(ar_->config().slot_bytes); }

  // ---------------------------------------------------------------- slots

  bool poll_slots(bool& any) {
    for (;;) {
      bool moved = false;
      if (written_ < rounds_ && may_write(written_)) {
        write(written_++);
        moved = true;
      }
      if (reduced_ < rounds_rs_) {
        if (all_published(base_ + static_cast<uint64_t>(reduced_) + 1)) {
          reduce_round(reduced_++);
          moved = true;
        }
      } else {
        for (int p = 0; p < n_; ++p) {
          if (p == me_) continue;
          int64_t& r = rd_[static_cast<size_t>(p)];
          while (r < rounds_ && ar_->pub(p).load(kAcq) >= base_ + static_cast<uint64_t>(r) + 1) {
            copy_round(p, r);
            ++r;
            ar_->ack(me_, p).store(base_ + static_cast<uint64_t>(r), kRel);
            moved = true;
          }
        }
      }
      if (!moved) break;
      any = true;
    }
    if (written_ < rounds_ || reduced_ < rounds_rs_) return false;
    for (int p = 0; p < n_; ++p)
      if (p != me_ && rd_[static_cast<size_t>(p)] < rounds_) return false;
    return true;
  }

  bool all_published(uint64_t count) const {
    for (int p = 0; p < n_; ++p)
      if (p != me_ && ar_->pub(p).load(kAcq) < count) return false;
    return true;
  }

  // Piece g may go into half g % 2 once every peer has finished with piece g - 2; an
  // all-reduce's all-gather piece also needs its segment reduced.
  bool may_write(int64_t w) const {
    const uint64_t g = base_ + static_cast<uint64_t>(w);
    if (w >= rounds_rs_ && rounds_rs_ > 0) {
      const int64_t hi = std::min((w - rounds_rs_ + 1) * seg_ag_, c_);
      if (std::min(reduced_ * seg_rs_, c_) < hi) return false;
    }
    if (g < 2) return true;
    for (int q = 0; q < n_; ++q)
      if (q != me_ && ar_->ack(q, me_).load(kAcq) < g - 1) return false;
    return true;
  }

  void write(int64_t w) {
    const uint64_t g = base_ + static_cast<uint64_t>(w);
    std::byte* slot = ar_->slot(me_, g);
    ar_->signature(me_, g) = sig_;
    if (w < rounds_rs_) {
      const int64_t lo = w * seg_rs_;
      for (int j = 0; j < n_; ++j) {
        if (j == me_) continue;
        const int64_t n = clip(len(j), lo, seg_rs_);
        if (n > 0)
          std::memcpy(slot + rs_offset(me_, j) * esize_, at(a_.in, begin(j) + lo), static_cast<size_t>(n * esize_));
      }
    } else {
      const int64_t lo = (w - rounds_rs_) * seg_ag_;
      const int64_t n = clip(len(me_), lo, seg_ag_);
      // all_gather: `in` is this rank's chunk; all_reduce: the reduced chunk in place.
      const std::byte* src = a_.kind == RingKind::AllGather ? at(a_.in, lo) : at(a_.out, begin(me_) + lo);
      if (n > 0) std::memcpy(slot, src, static_cast<size_t>(n * esize_));
    }
    ar_->pub(me_).store(g + 1, kRel);
  }

  void reduce_round(int64_t t) {
    const uint64_t g = base_ + static_cast<uint64_t>(t);
    const int64_t lo = t * seg_rs_;
    const int64_t n = clip(len(me_), lo, seg_rs_);
    for (int p = 0; p < n_; ++p)
      if (p != me_) check_piece(p, g);
    if (n > 0) {
      void* dst = a_.kind == RingKind::ReduceScatter ? at(a_.out, lo) : at(a_.out, begin(me_) + lo);
      reduce_in_order(dst, n, [&](int p) -> const void* {
        if (p == me_) return at(a_.in, begin(me_) + lo);
        return ar_->slot(p, g) + rs_offset(p, me_) * esize_;
      });
    }
    for (int p = 0; p < n_; ++p) {
      if (p == me_) continue;
      rd_[static_cast<size_t>(p)] = t + 1;
      ar_->ack(me_, p).store(g + 1, kRel);
    }
  }

  void copy_round(int p, int64_t r) {
    const uint64_t g = base_ + static_cast<uint64_t>(r);
    const int64_t lo = (r - rounds_rs_) * seg_ag_;
    const int64_t n = clip(len(p), lo, seg_ag_);
    check_piece(p, g);
    if (n > 0) std::memcpy(at(a_.out, begin(p) + lo), ar_->slot(p, g), static_cast<size_t>(n * esize_));
  }

  // Piece g of rank p must belong to this very op; anything else means the ranks issued
  // different ops (sizes, dtypes or reduce ops differ) and the streams are out of step.
  void check_piece(int p, uint64_t g) const {
    const PieceSignature& theirs = ar_->signature(p, g);
    if (theirs == sig_) return;
    STRATA_FAIL("shared-memory collective: group rank ", p, " issued a different op than this rank (group rank ", me_,
                "): ", describe(theirs), " vs ", describe(sig_),
                "; every rank must pass the same sizes, dtype and reduce op (STRATA_DEBUG_COLLECTIVES=1 checks "
                "this before each collective)");
  }
  static std::string describe(const PieceSignature& s) {
    static const char* kinds[] = {"all_reduce", "reduce_scatter", "all_gather"};
    const char* kind = s.kind >= 0 && s.kind < 3 ? kinds[s.kind] : "unknown op";
    std::string text = "shm op #" + std::to_string(s.ticket) + " " + kind + " of " + std::to_string(s.count) +
                       " elements of " + std::to_string(s.element_bytes) + " bytes";
    const bool reduces = s.kind != static_cast<int32_t>(RingKind::AllGather);
    if (reduces && s.op >= 0 && s.op <= static_cast<int32_t>(ReduceOp::Product))
      text += " (" + std::string(reduce_op_name(static_cast<ReduceOp>(s.op))) + ")";
    return text;
  }

  // ---------------------------------------------------------------- CMA

  void cma_read(int p, void* dst, uint64_t remote, int64_t bytes) const {
    auto* d = static_cast<std::byte*>(dst);
    size_t left = static_cast<size_t>(bytes);
    while (left > 0) {
      iovec local{d, left};
      iovec far{reinterpret_cast<void*>(remote), left};
      const ssize_t got = process_vm_readv(ar_->pid(p), &local, 1, &far, 1, 0);
      if (got < 0 && errno == EINTR) continue;
      STRATA_CHECK(got > 0, "shared-memory collective: reading group rank ", p, "'s buffer (pid ", ar_->pid(p),
                   ") with process_vm_readv failed: ", got < 0 ? std::strerror(errno) : "no bytes read",
                   " (STRATA_MPI_SHM_CMA=0 turns direct reads off)");
      d += got;
      remote += static_cast<uint64_t>(got);
      left -= static_cast<size_t>(got);
    }
  }

  bool peers_at(uint64_t ph) const {
    for (int p = 0; p < n_; ++p)
      if (p != me_ && ar_->ready(p).load(kAcq) < ph) return false;
    return true;
  }

  bool peers_acked(uint64_t ph) const {
    for (int q = 0; q < n_; ++q)
      if (q != me_ && ar_->cma_ack(q, me_).load(kAcq) < ph) return false;
    return true;
  }

  bool poll_cma(bool& any) {
    // all_gather: each peer's buffer is its chunk, read straight into place.
    if (a_.kind == RingKind::AllGather) return read_peer_chunks(phase(1), false, any);
    if (!reduced_cma_) {
      if (!peers_at(phase(1))) return false;
      reduce_chunk_cma();
      reduced_cma_ = true;
      any = true;
      for (int p = 0; p < n_; ++p)
        if (p != me_) ar_->cma_ack(me_, p).store(phase(1), kRel);
      if (a_.kind == RingKind::AllReduce) ar_->ready(me_).store(phase(2), kRel);
    }
    if (a_.kind == RingKind::ReduceScatter) return peers_acked(phase(1));
    // All-reduce: every peer's reduced chunk, read from its (full) buffer into ours.
    return read_peer_chunks(phase(2), true, any);
  }

  // Reads chunk p of every peer p into place in the output as soon as p has reached CMA
  // phase `ph` (`at_chunk`: p's buffer holds the whole tensor, so its chunk starts at
  // begin(p); else p's buffer is its chunk), acknowledging each read. Done once every
  // chunk is read and every peer has finished reading ours.
  bool read_peer_chunks(uint64_t ph, bool at_chunk, bool& any) {
    for (int p = 0; p < n_; ++p) {
      if (p == me_ || done_[static_cast<size_t>(p)] || ar_->ready(p).load(kAcq) < ph) continue;
      uint64_t remote = ar_->addr(p).load(std::memory_order_relaxed);
      if (at_chunk) remote += static_cast<uint64_t>(begin(p) * esize_);
      cma_read(p, at(a_.out, begin(p)), remote, len(p) * esize_);
      ar_->cma_ack(me_, p).store(ph, kRel);
      done_[static_cast<size_t>(p)] = true;
      any = true;
    }
    for (int p = 0; p < n_; ++p)
      if (p != me_ && !done_[static_cast<size_t>(p)]) return false;
    return peers_acked(ph);
  }

  // Chunk me_ of every rank, piece by piece: the peers' pieces read into scratch, then
  // reduced in rank order into the result.
  void reduce_chunk_cma() {
    const int64_t piece = std::max<int64_t>(1, ar_->config().slot_bytes / esize_);
    std::byte* scratch = ar_->scratch(scratch_bytes());
    const int64_t total = len(me_);
    for (int64_t lo = 0; lo < total; lo += piece) {
      const int64_t n = std::min(piece, total - lo);
      const uint64_t off = static_cast<uint64_t>((begin(me_) + lo) * esize_);
      for (int p = 0; p < n_; ++p) {
        if (p == me_) continue;
        cma_read(p, scratch + rs_slot(p) * piece * esize_, ar_->addr(p).load(std::memory_order_relaxed) + off,
                 n * esize_);
      }
      void* dst = a_.kind == RingKind::ReduceScatter ? at(a_.out, lo) : at(a_.out, begin(me_) + lo);
      reduce_in_order(dst, n, [&](int p) -> const void* {
        if (p == me_) return at(a_.in, begin(me_) + lo);
        return scratch + rs_slot(p) * piece * esize_;
      });
    }
  }
  int64_t rs_slot(int p) const { return p < me_ ? p : p - 1; }

  std::shared_ptr<ShmArena> ar_;
  ShmArgs a_;
  int n_, me_;
  int64_t esize_;
  uint64_t ticket_ = 0;
  PieceSignature sig_;  // written into every piece this rank publishes, checked in every piece it reads
  int64_t c_ = 0;
  bool cma_ = false;
  bool started_ = false;
  bool own_copy_ = false;  // all_gather: `in` is not already in place in `out`
  // Slots.
  uint64_t base_ = 0;  // this op's first piece in the stream (the same on every rank)
  int64_t seg_rs_ = 1, seg_ag_ = 1, rounds_rs_ = 0, rounds_ag_ = 0, rounds_ = 0;
  int64_t written_ = 0, reduced_ = 0;
  std::vector<int64_t> rd_;  // rounds of each peer's pieces consumed
  // CMA.
  bool reduced_cma_ = false;
  std::vector<bool> done_;  // peers read (the final phase)
};

}  // namespace

bool use_shm(const GroupState& g, int64_t bytes) {
  if (!g.shm || g.size < 2) return false;
  const ShmConfig& c = g.shm->config();
  return bytes >= c.min_bytes && bytes <= c.max_bytes;
}

PhasePoll make_shm(const std::shared_ptr<ShmArena>& arena, const ShmArgs& args) {
  STRATA_CHECK(arena != nullptr, "shared-memory collective: no shared-memory arena");
  auto state = std::make_shared<ShmOp>(arena, args);
  return [state, arena] {
    try {
      return state->poll();
    } catch (...) {
      arena->failed = true;  // the flags are out of step: later ops of the arena fail too
      throw;
    }
  };
}

void start_shm(Op& op, const ShmArgs& args) {
  STRATA_CHECK(op.group && op.group->shm, "shared-memory collective: the group has no shared-memory arena");
  op.poll = [poll = make_shm(op.group->shm, args)](Op&) { return poll(); };
}

}  // namespace strata::dist::mpi
