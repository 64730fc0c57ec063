#pragma once
// Starting and stopping the distributed runtime.
//
//   auto& world = strata::dist::init();   // under mpirun, srun, or alone (world size 1)
//   ... world.all_reduce(t)->wait(); ...
//   strata::dist::finalize();              // optional: also runs at exit
#include "strata/distributed/process_group.h"

namespace strata::dist {

struct InitOptions {
  // Timeout of the world group's ops (groups split from it, and NCCL groups made over it,
  // inherit it).
  std::chrono::milliseconds timeout = kDefaultTimeout;
  // Where GPUs are visible: makes cuda:(local_rank % device count) the calling thread's
  // current device, the device new_nccl_group and Device-less CUDA code then use.
  bool select_gpu = true;
  // false: a local world of size 1 whose ops are copies, without starting MPI. For
  // single-process programs that only read and write files (strata-ckpt): MPI's start-up
  // costs time and, under a launcher, would join a job that is not theirs.
  bool start_mpi = true;
};

// Initialises MPI once and returns the world group. strata starts one worker thread per
// process, which calls MPI_Init_thread asking for MPI_THREAD_SERIALIZED (any thread may
// call MPI, one at a time). strata's MPI calls run under one per-process progress lock: a
// thread waiting on an op (Work::wait, synchronize) takes it and drives MPI itself, the
// issuing thread starts a new op when the lock is free, and the worker progresses the ops
// nobody waits on; ops start in issue order across all groups. If MPI provides only
// MPI_THREAD_FUNNELED (or STRATA_MPI_CALLER_SPIN_US=0), waiting threads never drive and
// every MPI call stays on the worker; below FUNNELED init fails. If the application
// initialised MPI itself, it must provide MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE.
// Once every issued op has completed, the application may call MPI itself until it issues
// the next one. Works under mpirun (Open MPI), Slurm's srun (PMIx) and as a plain process
// (a singleton MPI world of size 1; if MPI cannot start without a launcher, or strata was
// built without MPI, a local world of size 1 whose ops are copies). Sets the error rank.
// STRATA_DEBUG_COLLECTIVES=1 (read here) checks that every rank issues the same collective
// before running it.
ProcessGroup& init(const InitOptions& options = {});
bool is_initialized();
ProcessGroup& world();  // throws when not initialised (or after finalize)
int local_rank();       // OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, or a shared-memory split
int local_size();
// An NCCL group of every rank of `bootstrap` (the world, or a group split from it) for
// CUDA tensors on the calling thread's current device (see InitOptions::select_gpu).
// Collective over `bootstrap`: rank 0 creates NCCL's unique id and `bootstrap` broadcasts
// it. NCCL allows one rank per GPU: ranks sharing a GPU are named and refused. Sub-groups:
// split() on the result (ncclCommSplit). The group inherits bootstrap's timeout; its name
// is `name`, or "nccl(<bootstrap's name>)". Throws "strata was built without NCCL" in
// builds without it, and names the device where no GPU is usable. Over an MPI bootstrap
// group, each NCCL op also sends one small MPI message to every peer, so that a timeout can
// name the ranks that had not reached the op (over a local world they are "unknown"). See
// docs/distributed.md for the stream semantics of wait() and synchronize() and for timeouts.
std::unique_ptr<ProcessGroup> new_nccl_group(ProcessGroup& bootstrap, const std::string& name = "");
// True when strata was built with NCCL (new_nccl_group can work where a GPU is visible).
bool nccl_is_built();

// Waits for outstanding work, destroys groups and finalises MPI. Safe to call twice; runs
// at exit when the program did not call it. Using a group afterwards raises strata::Error.
void finalize();

}  // namespace strata::dist
