#include "distributed/mpi/topology.h"

#include "distributed/env_settings.h"
#include "distributed/mpi/engine.h"

namespace strata::dist::mpi {

NodeSplit split_by_node(MPI_Comm comm, int rank) {
  NodeSplit s;
  STRATA_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &s.comm));
  // Validated at init (Engine::start), so this cannot throw here on one rank only.
  const int64_t pretend = detail::test_node_size();
  if (pretend > 0) {
    int world_rank = 0;
    STRATA_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank));
    MPI_Comm real = s.comm;
    STRATA_MPI(MPI_Comm_split(real, static_cast<int>(world_rank / pretend), rank, &s.comm));
    STRATA_MPI(MPI_Comm_free(&real));
  }
  STRATA_MPI(MPI_Comm_rank(s.comm, &s.rank));
  STRATA_MPI(MPI_Comm_size(s.comm, &s.size));
  return s;
}

}  // namespace strata::dist::mpi
