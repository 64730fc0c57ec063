#include "strata/distributed/init.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "distributed/backend.h"
#include "strata/core/error.h"
#include "strata/tensor/cuda.h"

namespace strata::dist {
namespace {

std::recursive_mutex g_mu;
// Kept after finalize (never destroyed before exit) so that a stale reference to the world
// group raises strata::Error instead of touching freed memory.
std::unique_ptr<ProcessGroup> g_world;
enum class State { None, Running, Finalized };
State g_state = State::None;
int g_local_rank = 0;
int g_local_size = 1;

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  return (end != nullptr && *end == '\0' && x >= 0) ? static_cast<int>(x) : fallback;
}

bool under_launcher() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

// The number of processes a launcher started (mpirun, srun), or 0 when none says.
int launched_ranks() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS"}) {
    const int n = env_int(name, 0);
    if (n > 0) return n;
  }
  return 0;
}

void finalize_at_exit() {
  try {
    finalize();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata::dist::finalize at exit: %s\n", e.what());
  }
}

}  // namespace

ProcessGroup& init(const InitOptions& options) {
  std::lock_guard<std::recursive_mutex> lk(g_mu);
  STRATA_CHECK(g_state != State::Finalized, "dist::init: the distributed runtime was finalized; it cannot be "
                                            "started again in the same process (MPI allows one init per process)");
  if (g_state == State::Running) return *g_world;
  detail::Backend b;
#ifdef STRATA_HAS_MPI
  if (options.start_mpi) {
    try {
      b = detail::start_mpi();
    } catch (const Error& e) {
      // Without a launcher, a failed singleton MPI start degrades to a one-process world;
      // under mpirun/srun a failure is real.
      if (under_launcher()) throw;
      std::fprintf(stderr, "strata: MPI could not start (%s); running as a single process without MPI\n", e.what());
      b.world = detail::make_local_world();
    }
  } else {
    STRATA_CHECK(launched_ranks() <= 1, "dist::init without MPI (start_mpi = false) under a launcher of ",
                 launched_ranks(), " ranks: each would be a separate world of one; run this program as one process");
    b.world = detail::make_local_world();
  }
#else
  b.world = detail::make_local_world();
#endif
  g_world = std::move(b.world);
  g_world->set_timeout(options.timeout);
  // The launcher's view of the node wins; the shared-memory split is the fallback.
  g_local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", env_int("SLURM_LOCALID", b.local_rank));
  g_local_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", b.local_size);
  g_state = State::Running;
  set_error_rank(g_world->rank());
  static bool registered = false;
  if (!registered) {
    std::atexit(finalize_at_exit);
    registered = true;
  }
  // One GPU per local rank (ranks beyond the GPU count share them round robin: fine for
  // the MPI group's host staging, refused by new_nccl_group).
  if (options.select_gpu && cuda::device_count() > 0) cuda::set_device(g_local_rank % cuda::device_count());
  return *g_world;
}

bool is_initialized() {
  std::lock_guard<std::recursive_mutex> lk(g_mu);
  return g_state == State::Running;
}

ProcessGroup& world() {
  std::lock_guard<std::recursive_mutex> lk(g_mu);
  STRATA_CHECK(g_state == State::Running, "dist::world: the distributed runtime is ",
               g_state == State::None ? "not initialised (call strata::dist::init() first)" : "finalized");
  return *g_world;
}

int local_rank() {
  world();
  return g_local_rank;
}

int local_size() {
  world();
  return g_local_size;
}

std::unique_ptr<ProcessGroup> new_nccl_group(ProcessGroup& bootstrap, const std::string& name) {
#ifdef STRATA_HAS_NCCL
  return detail::make_nccl_group(bootstrap, name);
#else
  (void)name;
  STRATA_FAIL("new_nccl_group over group '", bootstrap.name(), "': strata was built without NCCL (configure with "
              "-DSTRATA_WITH_CUDA=ON -DSTRATA_WITH_NCCL=ON where CUDA and NCCL are installed); the MPI group takes "
              "CUDA tensors by staging them through the host");
#endif
}

bool nccl_is_built() {
#ifdef STRATA_HAS_NCCL
  return true;
#else
  return false;
#endif
}

void finalize() {
  std::lock_guard<std::recursive_mutex> lk(g_mu);
  if (g_state != State::Running) return;
  g_state = State::Finalized;
#ifdef STRATA_HAS_MPI
  detail::stop_mpi();
#endif
}

}  // namespace strata::dist
