#include "distributed/backend.h"
#include "distributed/mpi/engine.h"
#include "distributed/mpi/process_group_mpi.h"

namespace strata::dist::detail {

Backend start_mpi() {
  mpi::InitResult r = mpi::Engine::start();
  Backend b;
  b.world = std::make_unique<mpi::ProcessGroupMPI>(r.world);
  b.local_rank = r.local_rank;
  b.local_size = r.local_size;
  return b;
}

void stop_mpi() { mpi::Engine::finalize(); }

}  // namespace strata::dist::detail
