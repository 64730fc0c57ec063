#pragma once
// The shared-memory arena of an MPI group whose ranks all live on one node: the memory the
// shared-memory collectives (shm_collectives.h) exchange data and sequence flags through.
//
// Lifetime: made once when the group is made (collective over the group's communicator):
// group rank 0 creates a POSIX shared-memory object under a unique name, every rank maps
// it, and rank 0 unlinks the name as soon as everyone has mapped it, so nothing is left
// behind if a process dies. (Not MPI_Win_allocate_shared: freeing a window is a barrier,
// which a timed-out or dying group cannot pass.) Unmapped when the group is destroyed.
//
// Layout (every flag on a cache line of its own; all flags count up and never go back):
//   per rank r:  pub(r)     pieces r has published into its slot area (the slot stream)
//                ready(r)   the CMA phase r has reached (2k+1: inputs readable for its
//                           shm op k; 2k+2: its reduced chunk readable)
//                addr(r)    the address of r's buffer for CMA reads; pid(r)
//   per pair:    ack(q, p)  pieces of p's slot stream that q has finished with
//                cma_ack(q, p)  the CMA phase of p that q has finished reading
//   per rank r:  two slot halves of slot_bytes each (piece g lives in half g % 2), each
//                starting with the signature of the op that wrote the piece.
//
// The configuration (slot size, size windows, whether CMA is used) is rank 0's, broadcast
// at creation, so every rank decides alike for every op.
#include <mpi.h>
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace strata::dist::mpi {

// What a slot half says about the op its piece belongs to. A reader checks it against its
// own op: ranks that pass different sizes (or dtypes, ops) would otherwise put the slot
// streams out of step and feed a later op stale pieces.
struct PieceSignature {
  uint64_t ticket = 0;  // the group's shm op number (ShmArena::issued)
  int64_t count = 0;    // elements of the full buffer
  int32_t kind = 0;     // RingKind
  int32_t op = 0;       // ReduceOp
  int64_t element_bytes = 0;
  bool operator==(const PieceSignature&) const = default;
};

struct ShmConfig {
  int64_t slot_bytes = 256 << 10;  // STRATA_MPI_SHM_SLOT_BYTES: one half of a rank's slot area
  int64_t min_bytes = 0;           // STRATA_MPI_SHM_MIN_BYTES: smaller ops use MPI's own collective
  int64_t max_bytes = INT64_MAX;   // STRATA_MPI_SHM_MAX_BYTES: larger ops take the ring
  // From these sizes up direct reads (CMA) replace the slots, where `cma`
  // (STRATA_MPI_SHM_CMA_GATHER_MIN_BYTES / _REDUCE_MIN_BYTES; off unless set or STRATA_MPI_SHM_CMA=1).
  int64_t cma_gather_min = INT64_MAX;
  int64_t cma_reduce_min = INT64_MAX;
  bool cma = false;  // direct reads possible and agreed on by every rank (see create)
};

class ShmArena {
 public:
  // Collective over `comm` (rank `rank` of `size`; `node_size` of its ranks share this
  // rank's node, topology.h); null when the group does not qualify (STRATA_MPI_SHM=0 on any
  // rank, one rank, ranks on several nodes, the shared memory could not be made).
  // Progress-lock holder only (it calls MPI).
  static std::shared_ptr<ShmArena> create(MPI_Comm comm, int rank, int size, int node_size);
  ~ShmArena();
  ShmArena(const ShmArena&) = delete;
  ShmArena& operator=(const ShmArena&) = delete;

  const ShmConfig& config() const { return config_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

  std::atomic<uint64_t>& pub(int r) const { return line(pub_off_, r); }
  std::atomic<uint64_t>& ready(int r) const { return line(ready_off_, r); }
  std::atomic<uint64_t>& addr(int r) const { return line(addr_off_, r); }
  std::atomic<uint64_t>& ack(int q, int p) const { return line(ack_off_, q * size_ + p); }
  std::atomic<uint64_t>& cma_ack(int q, int p) const { return line(cma_ack_off_, q * size_ + p); }
  // Where piece `piece` of rank r's stream lives: its signature, then its data
  // (slot_payload() bytes).
  PieceSignature& signature(int r, uint64_t piece) const { return *reinterpret_cast<PieceSignature*>(half(r, piece)); }
  std::byte* slot(int r, uint64_t piece) const { return half(r, piece) + kPieceHeaderBytes; }
  int64_t slot_payload() const { return config_.slot_bytes - kPieceHeaderBytes; }
  pid_t pid(int r) const { return pids_[static_cast<size_t>(r)]; }

  // Process-local state of the ops (progress-lock holder): shm ops of a group run one at a
  // time, in issue order, which is the same on every rank; `issued` numbers them (k).
  uint64_t issued = 0;
  uint64_t completed = 0;
  bool failed = false;  // an op failed part-way: the flags are no longer in step
  // Scratch for CMA reductions, kept for reuse (fresh pages fault on first touch).
  std::byte* scratch(size_t bytes);

 private:
  ShmArena() = default;
  static constexpr int64_t kPieceHeaderBytes = 64;  // keeps the data cache-line aligned
  static_assert(sizeof(PieceSignature) <= kPieceHeaderBytes);
  std::byte* half(int r, uint64_t piece) const {
    return base_ + slots_off_ + (static_cast<size_t>(r) * 2 + piece % 2) * static_cast<size_t>(config_.slot_bytes);
  }
  std::atomic<uint64_t>& line(size_t off, int i) const {
    return *reinterpret_cast<std::atomic<uint64_t>*>(base_ + off + static_cast<size_t>(i) * 64);
  }
  void layout();
  // Rank 0: creates, sizes and maps the shared-memory object, writing its name to `name_out`
  // (base_ stays null on failure). The others open and map it by that name.
  void make_object(char* name_out, size_t capacity);
  void open_object(const char* name);
  // Probes whether direct reads (CMA) work here and agrees on it with every rank (collective).
  void agree_on_cma(MPI_Comm comm, int32_t cma_wanted);

  ShmConfig config_;
  int rank_ = 0, size_ = 1;
  std::byte* base_ = nullptr;
  size_t bytes_ = 0;
  size_t pub_off_ = 0, ready_off_ = 0, addr_off_ = 0, pid_off_ = 0, ack_off_ = 0, cma_ack_off_ = 0, slots_off_ = 0;
  std::vector<pid_t> pids_;
  std::unique_ptr<std::byte[]> scratch_;
  size_t scratch_bytes_ = 0;
  uint64_t probe_ = 0;  // read by the peers' CMA probe at creation
};

}  // namespace strata::dist::mpi
