#pragma once
// What a launcher (mpirun, srun) tells each process through its environment: readable
// before MPI starts, so that startup itself can be watched (startup_watchdog.h).
#include <string>

namespace strata::dist::detail {

struct LauncherView {
  int rank = -1;       // this process's world rank; -1 when no launcher says
  int size = 0;        // processes the launcher started; 0 when none says
  int local_size = 0;  // of them on this node; 0 when unknown
  // Identifies the job among others on the node (PMIx namespace, Open MPI job id, Slurm
  // job.step), reduced to [A-Za-z0-9._-]; empty when none is set.
  std::string job;
};

LauncherView launcher_view();

// True when some launcher's rank or size variable is set.
bool under_launcher();

// A non-negative integer variable, or `fallback` when unset, empty or malformed.
int env_nonnegative(const char* name, int fallback);

}  // namespace strata::dist::detail
