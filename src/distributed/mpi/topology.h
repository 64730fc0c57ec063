#pragma once
// Which ranks of a group share a node: the basis of the algorithm choice (one node: shared
// memory, shm_collectives.h; several nodes with the same number of the group's ranks each:
// the hierarchical collectives, hierarchy.h; otherwise the flat ring, ring.h).
//
// A node is what MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) says. For tests on one machine,
// STRATA_TEST_NODE_SIZE=S further cuts each node into pretend nodes of S consecutive world
// ranks (world ranks {0..S-1}, {S..2S-1}, ...): every decision then treats them as separate
// nodes, while their ranks can still share memory.
#include <mpi.h>

namespace strata::dist::mpi {

struct NodeSplit {
  MPI_Comm comm = MPI_COMM_NULL;  // the group's ranks on this rank's node; the caller frees it
  int rank = 0;                   // this rank's place there (ordered by group rank)
  int size = 1;
};

// Collective over `comm`, whose rank this is (progress-lock holder: it calls MPI).
NodeSplit split_by_node(MPI_Comm comm, int rank);

}  // namespace strata::dist::mpi
