#include "distributed/mpi/shm_arena.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "distributed/env_settings.h"
#include "distributed/mpi/engine.h"
#include "strata/core/error.h"

namespace strata::dist::mpi {
namespace {

static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared-memory flags need lock-free 64-bit atomics");

int64_t env_bytes(const char* name, int64_t fallback) { return detail::env_count(name, fallback, "byte count"); }

// Tuned on the 2-core development machine (docs/performance.md): shared memory beat MPI's
// own collectives from 4 KiB up, and the slot path beat CMA at every size (so CMA is off
// unless asked for: STRATA_MPI_SHM_CMA=1, or size thresholds).
constexpr int64_t kDefaultMinBytes = 0;
constexpr int64_t kDefaultSlotBytes = 256 << 10;
constexpr int64_t kCmaOff = INT64_MAX;
constexpr uint64_t kProbeMagic = 0x5354524154414d41ULL;

// Ranks of the job on this node, taken from the first group made (the world): a sub-group
// of two ranks on a node running four is still oversubscribed.
int g_job_node_ranks = 0;

// The cores the group's ranks may run on: the union of their affinity masks (mpirun may
// bind each rank to one core; a cpuset limits the container).
int usable_cores(MPI_Comm comm) {
  cpu_set_t mine, all;
  CPU_ZERO(&mine);
  if (sched_getaffinity(0, sizeof(mine), &mine) != 0) {
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    for (long c = 0; c < n && c < CPU_SETSIZE; ++c) CPU_SET(static_cast<int>(c), &mine);
  }
  STRATA_MPI(MPI_Allreduce(&mine, &all, sizeof(cpu_set_t), MPI_BYTE, MPI_BOR, comm));
  return CPU_COUNT(&all);
}

// What rank 0 broadcasts: its configuration and the object's name.
struct Announce {
  ShmConfig config;
  int32_t cma_wanted = -1;  // STRATA_MPI_SHM_CMA: -1 auto, 0 off, 1 on
  char name[64] = {};
  char error[256] = {};  // rank 0's environment was invalid: every rank reports it
};

size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

}  // namespace

void ShmArena::layout() {
  const size_t lines = static_cast<size_t>(size_) * 64;
  pub_off_ = 0;
  ready_off_ = pub_off_ + lines;
  addr_off_ = ready_off_ + lines;
  pid_off_ = addr_off_ + lines;
  ack_off_ = pid_off_ + lines;
  cma_ack_off_ = ack_off_ + lines * static_cast<size_t>(size_);
  slots_off_ = round_up(cma_ack_off_ + lines * static_cast<size_t>(size_), 4096);
  bytes_ = slots_off_ + static_cast<size_t>(size_) * 2 * static_cast<size_t>(config_.slot_bytes);
}

namespace {

// Whether to try at all: every rank must agree (an MPI_Allreduce decides). STRATA_MPI_SHM=0
// on any rank turns it off for the group (read leniently: a throw here, on one rank only,
// would leave the others in the collective).
bool every_rank_wants(MPI_Comm comm, int size, int node_size) {
  const char* off = std::getenv("STRATA_MPI_SHM");
  const bool disabled = off != nullptr && std::strcmp(off, "0") == 0;
  int want = (!disabled && size > 1 && node_size == size) ? 1 : 0;
  int all_want = 0;
  STRATA_MPI(MPI_Allreduce(&want, &all_want, 1, MPI_INT, MPI_MIN, comm));
  return all_want != 0;
}

// Group rank 0's configuration from its environment; an invalid one is reported in `error`
// (every rank then throws it, after the broadcast).
Announce read_config(int size) {
  Announce ann;
  try {
    ShmConfig& c = ann.config;
    c.slot_bytes = env_bytes("STRATA_MPI_SHM_SLOT_BYTES", kDefaultSlotBytes);
    STRATA_CHECK(c.slot_bytes >= 4096 && c.slot_bytes % 64 == 0, "STRATA_MPI_SHM_SLOT_BYTES=", c.slot_bytes,
                 " must be a multiple of 64 of at least 4096");
    // A reduce-scatter piece holds one segment of every other rank's chunk.
    STRATA_CHECK(c.slot_bytes >= 64 * static_cast<int64_t>(size), "STRATA_MPI_SHM_SLOT_BYTES=", c.slot_bytes,
                 " is too small for ", size, " ranks (at least 64 bytes a rank)");
    c.min_bytes = env_bytes("STRATA_MPI_SHM_MIN_BYTES", kDefaultMinBytes);
    c.max_bytes = env_bytes("STRATA_MPI_SHM_MAX_BYTES", INT64_MAX);
    // STRATA_MPI_SHM_CMA=1: direct reads at every size (unless thresholds are given),
    // without the core check; unset: only where thresholds are given and the ranks
    // have a core each; 0: never.
    ann.cma_wanted = detail::env_switch("STRATA_MPI_SHM_CMA");
    const int64_t cma_default = ann.cma_wanted == 1 ? 0 : kCmaOff;
    c.cma_gather_min = env_bytes("STRATA_MPI_SHM_CMA_GATHER_MIN_BYTES", cma_default);
    c.cma_reduce_min = env_bytes("STRATA_MPI_SHM_CMA_REDUCE_MIN_BYTES", cma_default);
  } catch (const std::exception& e) {
    std::snprintf(ann.error, sizeof(ann.error), "%s", e.what());
  }
  return ann;
}

}  // namespace

std::shared_ptr<ShmArena> ShmArena::create(MPI_Comm comm, int rank, int size, int node_size) {
  if (g_job_node_ranks == 0) g_job_node_ranks = node_size;
  if (!every_rank_wants(comm, size, node_size)) return nullptr;

  std::shared_ptr<ShmArena> a(new ShmArena);
  a->rank_ = rank;
  a->size_ = size;
  Announce ann;
  if (rank == 0) ann = read_config(size);
  if (rank == 0 && ann.error[0] == '\0') {
    a->config_ = ann.config;
    a->layout();
    a->make_object(ann.name, sizeof(ann.name));
  }
  STRATA_MPI(MPI_Bcast(&ann, sizeof(ann), MPI_BYTE, 0, comm));
  STRATA_CHECK(ann.error[0] == '\0', "shared-memory collectives (group rank 0's environment): ", ann.error);
  if (rank != 0 && ann.name[0] != '\0') {
    a->config_ = ann.config;
    a->layout();
    a->open_object(ann.name);
  }
  int ok = a->base_ != nullptr ? 1 : 0, all_ok = 0;
  STRATA_MPI(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm));
  // Everyone has mapped it (or given up): the name is no longer needed.
  if (rank == 0 && ann.name[0] != '\0') shm_unlink(ann.name);
  if (!all_ok) return nullptr;  // the destructor unmaps
  a->agree_on_cma(comm, ann.cma_wanted);
  return a;
}

void ShmArena::make_object(char* name_out, size_t capacity) {
  static int counter = 0;
  std::string name = "/strata-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return;
  // posix_fallocate, not just ftruncate: tmpfs reserves the pages now or says ENOSPC,
  // instead of a SIGBUS at the first write past a full /dev/shm (containers give 64 MiB).
  if (ftruncate(fd, static_cast<off_t>(bytes_)) == 0 && posix_fallocate(fd, 0, static_cast<off_t>(bytes_)) == 0) {
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) {
      base_ = static_cast<std::byte*>(p);
      std::snprintf(name_out, capacity, "%s", name.c_str());
    }
  }
  close(fd);
  if (base_ == nullptr) shm_unlink(name.c_str());
}

void ShmArena::open_object(const char* name) {
  int fd = shm_open(name, O_RDWR, 0600);
  if (fd < 0) return;
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p != MAP_FAILED) base_ = static_cast<std::byte*>(p);
  close(fd);
}

// CMA (process_vm_readv from a peer's buffer): only where the ranks have a core each
// (oversubscribed, a direct read waits for the peer's core) unless forced, and only
// where the kernel lets us read a peer (ptrace restrictions give EPERM): probed here
// and agreed on by every rank.
void ShmArena::agree_on_cma(MPI_Comm comm, int32_t cma_wanted) {
  probe_ = kProbeMagic;
  addr(rank_).store(reinterpret_cast<uint64_t>(&probe_), std::memory_order_relaxed);
  line(pid_off_, rank_).store(static_cast<uint64_t>(getpid()), std::memory_order_relaxed);
  STRATA_MPI(MPI_Barrier(comm));
  pids_.resize(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) pids_[static_cast<size_t>(r)] = static_cast<pid_t>(line(pid_off_, r).load());
  const bool sizes_off = config_.cma_gather_min == kCmaOff && config_.cma_reduce_min == kCmaOff;
  int cma = cma_wanted == 0 || sizes_off ? 0
            : cma_wanted == 1            ? 1
                                         : (usable_cores(comm) >= std::max(size_, g_job_node_ranks) ? 1 : 0);
  if (cma) {
    const int peer = (rank_ + 1) % size_;
    uint64_t got = 0;
    iovec local{&got, sizeof(got)};
    iovec remote{reinterpret_cast<void*>(addr(peer).load()), sizeof(got)};
    cma =
        process_vm_readv(pid(peer), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(sizeof(got)) && got == kProbeMagic
            ? 1
            : 0;
  }
  int all_cma = 0;
  STRATA_MPI(MPI_Allreduce(&cma, &all_cma, 1, MPI_INT, MPI_MIN, comm));
  config_.cma = all_cma != 0;
  addr(rank_).store(0, std::memory_order_relaxed);
}

ShmArena::~ShmArena() {
  if (base_ != nullptr) munmap(base_, bytes_);
}

std::byte* ShmArena::scratch(size_t bytes) {
  if (bytes > scratch_bytes_) {
    scratch_ = std::make_unique<std::byte[]>(bytes);
    scratch_bytes_ = bytes;
  }
  return scratch_.get();
}

}  // namespace strata::dist::mpi
