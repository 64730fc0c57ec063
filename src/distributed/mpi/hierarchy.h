#pragma once
// Hierarchical all-reduce, reduce-scatter and all-gather for MPI groups that span several
// nodes with the same number L >= 2 of the group's ranks on each of K >= 2 nodes
// (topology.h says which ranks share a node). They chain the two algorithms we already
// have: the shared-memory collectives among a node's ranks (shm_collectives.h, over an
// arena of the node's L ranks) and the ring (ring.h) among the K ranks that have the same
// local index l, one per node ("sub-ring l"): L sub-rings run side by side, so every rank's
// link carries 1/L of the inter-node traffic and no rank forwards another node's data.
//
//   all_reduce:     shm reduce-scatter of the buffer over the node (local rank l gets chunk
//                   l of ceil(M/L)), ring all-reduce of that chunk over sub-ring l, shm
//                   all-gather over the node. In place, no staging copy.
//   reduce_scatter: the flat contract gives group rank r chunk r of ceil(M/N), N = K*L. The
//                   input is first copied into a staging buffer of N*c elements (c =
//                   ceil(M/N)), region l*K + n holding the chunk of the rank with local
//                   index l on node n, padded with zeros to c; then shm reduce-scatter over
//                   the node (local rank l gets regions l*K .. l*K+K-1), and ring
//                   reduce-scatter over sub-ring l (node n gets region l*K + n: its own chunk).
//   all_gather:     the reverse: this rank's chunk into its region, ring all-gather over
//                   sub-ring l, shm all-gather over the node, then every region copied to
//                   its chunk of `out`.
//
// Order of the additions (every result is computed once, then copied as bytes, so all ranks
// hold the same bits): each node first sums its ranks in local order (shared memory's rank
// order), then the node sums are added around the sub-ring as the ring does, starting after
// the node that finishes the piece: reduce_scatter's chunk of the rank on node n, and
// all_reduce's ring chunk j (of ceil(len/K)) inside local chunk l, end on node n (resp. j).
// Nodes are ordered by their lowest group rank, local indices by group rank.
#include <memory>
#include <vector>

#include "distributed/mpi/ring.h"
#include "distributed/mpi/topology.h"

namespace strata::dist::mpi {

struct Hierarchy {
  std::shared_ptr<ShmArena> node;  // the group's L ranks on this node
  RingPeers inter;                 // sub-ring l: rank = this node's index n, size = K
  int nodes = 0;                   // K
  int per_node = 0;                // L
  int node_index = 0;              // n
  int local = 0;                   // l
  std::vector<int> group_rank;     // [l * K + n]: the group rank with local index l on node n
  bool forced = false;             // STRATA_MPI_HIERARCHICAL=1: every size, not only the ring's

  // Collective over `comm` (rank `rank` of `size`, split into nodes by `nodes`); null where the
  // group does not qualify (one node, nodes with different numbers of its ranks, one rank a
  // node, STRATA_MPI_HIERARCHICAL=0 on any rank, no shared memory on some node). Every rank
  // gets the same answer. Progress-lock holder only.
  static std::shared_ptr<Hierarchy> create(MPI_Comm comm, int rank, int size, const NodeSplit& nodes);
  // Frees the sub-ring's communicator (the group's "free" op).
  void free_comms();
};

// Whether a collective of `bytes` (the full buffer, as for use_ring) on `g` is hierarchical:
// the group has a hierarchy and the ring would take this size (or STRATA_MPI_HIERARCHICAL=1).
bool use_hierarchical(const GroupState& g, int64_t bytes);

// Called from the op's last stage: sets op.poll to run the collective through op.group's
// hierarchy. The buffers must stay valid while the op lives.
void start_hierarchical(Op& op, const RingArgs& args);

}  // namespace strata::dist::mpi
