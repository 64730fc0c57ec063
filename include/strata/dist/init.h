#pragma once
// Starting and stopping the distributed runtime.
//
//   auto& world = strata::dist::init();   // under mpirun, srun, or alone (world size 1)
//   ... world.all_reduce(t)->wait(); ...
//   strata::dist::finalize();              // optional: also runs at exit
#include "strata/dist/process_group.h"

namespace strata::dist {

struct InitOptions {
  // Timeout of the world group's ops (groups split from it inherit it). (NCCL groups for
  // CUDA tensors will be created with new_nccl_group, bootstrapped over this one.)
  std::chrono::milliseconds timeout = kDefaultTimeout;
  bool select_gpu = true;  // cudaSetDevice(local_rank % device count) in CUDA builds (not yet: NCCL work)
};

// Initialises MPI once and returns the world group. Every MPI call of the process (the
// MPI_Init_thread included) runs on one worker thread, which serves all groups in issue
// order; it asks for MPI_THREAD_SERIALIZED and fails clearly below MPI_THREAD_FUNNELED (or
// below SERIALIZED when the application initialised MPI itself). Works under mpirun (Open
// MPI), Slurm's srun (PMIx) and as a plain process (a singleton MPI world of size 1; if MPI
// cannot start without a launcher, or strata was built without MPI, a local world of size
// 1 whose ops are copies). Sets the error rank. STRATA_DEBUG_COLLECTIVES=1 (read here)
// checks that every rank issues the same collective before running it.
ProcessGroup& init(const InitOptions& options = {});
bool is_initialized();
ProcessGroup& world();  // throws when not initialised (or after finalize)
int local_rank();       // OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, or a shared-memory split
int local_size();
// Waits for outstanding work, destroys groups and finalises MPI. Safe to call twice; runs
// at exit when the program did not call it. Using a group afterwards raises strata::Error.
void finalize();

}  // namespace strata::dist
