#include "strata/distributed/init.h"

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "distributed/backend.h"
#include "distributed/env_settings.h"
#include "distributed/launcher_env.h"
#include "distributed/startup_watchdog.h"
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

// The number of processes a launcher started (mpirun, srun), or 0 when none says.
int launched_ranks() { return detail::launcher_view().size; }

// Test hook (tests/faults/startup_stall.sh): rank STRATA_TEST_STOP_RANK_AT_INIT stops itself
// just before MPI initialisation, as a rank stopped or descheduled at launch would be.
void stop_for_test() {
  const int rank = detail::test_stop_rank_at_init();
  if (rank < 0 || rank != detail::launcher_view().rank) return;
  std::fprintf(stderr, "strata test hook: rank %d (pid %ld) stops itself before MPI initialisation\n", rank,
               static_cast<long>(::getpid()));
  std::fflush(stderr);
  std::raise(SIGSTOP);
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
  STRATA_CHECK(g_state != State::Finalized,
               "dist::init: the distributed runtime was finalized; it cannot be "
               "started again in the same process (MPI allows one init per process)");
  if (g_state == State::Running) return *g_world;
  detail::Backend b;
#ifdef STRATA_HAS_MPI
  if (options.start_mpi) {
    try {
      // MPI's start and the world group's setup are collectives over every rank with no
      // deadline of their own: the watchdog holds them to the world's timeout.
      detail::StartupWatchdog watchdog(options.timeout);
      stop_for_test();
      b = detail::start_mpi();
      watchdog.done();
    } catch (const Error& e) {
      // Without a launcher, a failed singleton MPI start degrades to a one-process world;
      // under mpirun/srun a failure is real.
      if (detail::under_launcher()) throw;
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
  g_local_rank =
      detail::env_nonnegative("OMPI_COMM_WORLD_LOCAL_RANK", detail::env_nonnegative("SLURM_LOCALID", b.local_rank));
  g_local_size = detail::env_nonnegative("OMPI_COMM_WORLD_LOCAL_SIZE", b.local_size);
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
  STRATA_FAIL("new_nccl_group over group '", bootstrap.name(),
              "': strata was built without NCCL (configure with "
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
  detail::release_startup_board();
#endif
}

}  // namespace strata::dist
