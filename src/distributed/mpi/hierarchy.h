#pragma once
// Hierarchical all-reduce, reduce-scatter and all-gather for MPI groups that span several
// nodes with the same number L >= 2 of the group's ranks on each of K >= 2 nodes
// (topology.h says which ranks share a node). They chain the two algorithms we already
// have: the shared-memory collectives among a node's ranks (shm_collectives.h, over an
// arena of the node's L ranks) and the ring (ring.h) among the K ranks that have the same
// local index l, one per node ("sub-ring l"): L sub-rings run side by side, so every rank's
// link carries 1/L of the inter-node traffic and no rank forwards another node's data.
//
//   all_reduce:     per segment of the buffer (hier_segment_elems; by default one, the
//                   whole buffer): shm reduce-scatter of the segment over the node (local
//                   rank l gets chunk l of ceil(len/L)), ring all-reduce of that chunk over
//                   sub-ring l, shm all-gather over the node; several segments overlap (one
//                   crosses the network while the node reduces the next and gathers the
//                   previous). In place, no staging copy.
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
// all_reduce's ring chunk j (of ceil(len_l/K)) inside local chunk l (of ceil(len/L)) of a
// segment (of len elements), end on node n (resp. j).
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
  int64_t segment_bytes = 0;       // all_reduce's segments (hier_segment_elems); the same on every rank

  // Collective over `comm` (rank `rank` of `size`, split into nodes by `nodes`); null where the
  // group does not qualify (one node, nodes with different numbers of its ranks, one rank a
  // node, STRATA_MPI_HIERARCHICAL=0 on any rank, no shared memory on some node). Every rank
  // gets the same answer. Progress-lock holder only.
  static std::shared_ptr<Hierarchy> create(MPI_Comm comm, int rank, int size, const NodeSplit& nodes);
  // Frees the sub-ring's communicator (the group's "free" op).
  void free_comms();
};

// all_reduce may run in segments that overlap (hierarchy.cpp, Pipeline): segment s is
// elements [s*E, min((s+1)*E, M)), E = segment_bytes / element size, at least
// ceil(M / kMaxSegments); one segment (E = M) when segment_bytes is 0, the default.
// STRATA_MPI_HIER_SEGMENT_BYTES sets segment_bytes; the group takes the largest value any
// rank asks for, so every rank cuts alike. Off by default: on the 2-vCPU test cluster the
// overlap gained nothing measurable and cost CPU (docs/performance.md).
constexpr int kMaxSegments = 64;
constexpr int64_t kDefaultHierSegmentBytes = 0;
int64_t hier_segment_elems(int64_t count, int64_t element_bytes, int64_t segment_bytes);

// Whether a collective of `bytes` (the full buffer, as for use_ring) on `g` is hierarchical:
// the group has a hierarchy and the ring would take this size (or STRATA_MPI_HIERARCHICAL=1).
bool use_hierarchical(const GroupState& g, int64_t bytes);

// Called from the op's last stage: sets op.poll to run the collective through op.group's
// hierarchy. The buffers must stay valid while the op lives.
void start_hierarchical(Op& op, const RingArgs& args);

}  // namespace strata::dist::mpi
