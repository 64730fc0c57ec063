#pragma once
// Starting and stopping the distributed runtime.
//
//   auto& world = strata::dist::init();   // under mpirun, srun, or alone (world size 1)
//   ... world.all_reduce(t)->wait(); ...
//   strata::dist::finalize();              // optional: also runs at exit
#include "strata/dist/process_group.h"

namespace strata::dist {

struct InitOptions {
  // Backend of the world group for CPU tensors. (NCCL groups for CUDA tensors are created
  // with new_nccl_group, bootstrapped over this one.)
  std::chrono::milliseconds timeout = kDefaultTimeout;
  bool select_gpu = true;  // cudaSetDevice(local_rank % device count) in CUDA builds
};

// Initialises MPI (MPI_THREAD_MULTIPLE where available, else SERIALIZED with all MPI calls
// on one worker thread) once and returns the world group. Works under mpirun (Open MPI),
// Slurm's srun (PMIx) and as a plain process (world size 1). Sets the error rank.
ProcessGroup& init(const InitOptions& options = {});
bool is_initialized();
ProcessGroup& world();  // throws when not initialised (or after finalize)
int local_rank();       // OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, or a shared-memory split
int local_size();
// Waits for outstanding work, destroys groups and finalises MPI. Safe to call twice; runs
// at exit when the program did not call it. Using a group afterwards raises strata::Error.
void finalize();

}  // namespace strata::dist
