#include "distributed/mpi/hierarchy.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "distributed/env_settings.h"
#include "distributed/mpi/local_reduce.h"
#include "distributed/mpi/shm_arena.h"
#include "distributed/mpi/shm_collectives.h"
#include "strata/core/error.h"

namespace strata::dist::mpi {
namespace {

// Runs `phases` one after the other (each until Done), then `after`.
class Chain {
 public:
  Chain(std::vector<PhasePoll> phases, std::function<void()> after)
      : phases_(std::move(phases)), after_(std::move(after)) {}
  PollResult poll() {
    bool any = false;
    while (next_ < phases_.size()) {
      const PollResult r = phases_[next_]();
      if (r != PollResult::Done)
        return (any || r == PollResult::Progressed) ? PollResult::Progressed : PollResult::Waiting;
      phases_[next_] = nullptr;  // releases its buffers
      ++next_;
      any = true;
    }
    if (after_) {
      after_();
      after_ = nullptr;
    }
    return PollResult::Done;
  }

 private:
  std::vector<PhasePoll> phases_;
  size_t next_ = 0;
  std::function<void()> after_;
};

std::byte* at(void* base, int64_t element, int64_t esize) { return static_cast<std::byte*>(base) + element * esize; }
const std::byte* at(const void* base, int64_t element, int64_t esize) {
  return static_cast<const std::byte*>(base) + element * esize;
}
// The ProcessGroup chunk rule: chunk j of `total` over `parts`.
int64_t chunk_begin(int64_t total, int parts, int j) { return std::min(j * ((total + parts - 1) / parts), total); }
int64_t chunk_len(int64_t total, int parts, int j) {
  return std::min(chunk_begin(total, parts, j) + (total + parts - 1) / parts, total) - chunk_begin(total, parts, j);
}

// reduce_scatter and all_gather work on node blocks: block k holds the chunks (of c =
// ceil(M/N)) of node k's ranks in local order, L*c elements, so that the node's shared-memory
// op gives local rank l the chunk of the rank with local index l on node k. Where those
// chunks are consecutive in the flat layout and all full (ranks placed node by node, every
// block but a short last one), the block is the user's buffer itself; otherwise it is a
// staging copy, padded with zeros.
struct Blocks {
  const Hierarchy& h;
  int64_t count, c, esize;
  int n() const { return h.nodes * h.per_node; }
  int rank_of(int node, int l) const { return h.group_rank[static_cast<size_t>(l * h.nodes + node)]; }
  bool direct(int node) const {
    const int first = rank_of(node, 0);
    for (int l = 0; l < h.per_node; ++l)
      if (rank_of(node, l) != first + l || chunk_len(count, n(), first + l) != c) return false;
    return true;
  }
  int64_t block_elems() const { return static_cast<int64_t>(h.per_node) * c; }
};

// all_reduce in segments of E elements (hier_segment_elems): segment s runs the three
// phases on its own (shm reduce-scatter, ring all-reduce of this rank's local chunk of it,
// shm all-gather), and the segments overlap: while segment s crosses the network, the
// arena already reduces segment s+1 .. s+kRingsInFlight-1 and gathers segment s-1, so the
// node-local work hides behind the network instead of adding to it.
//
// The arena runs its ops one at a time in the order they were made (the same on every
// rank of the node), so all of them are made up front in a fixed schedule: RS 0 .. RS D-1,
// then AG s, RS s+D for s = 0, 1, ... (D = kRingsInFlight). The arena only runs AG s once
// segment s's ring is done; segment s's ring starts once RS s is done. Each ring has its
// own tag (seq * kMaxSegments + s), so the rings of one op, in flight together on the
// sub-ring, never match each other's messages. With one segment (the default) this is the
// three phases one after the other.
constexpr int kRingsInFlight = 2;  // rings of one op in flight at once

class Pipeline {
 public:
  Pipeline(const Hierarchy& h, int64_t seq, const RingArgs& a) : h_(h), seq_(seq), a_(a) {
    const int64_t esize = static_cast<int64_t>(element_size(a.type));
    const int64_t e = hier_segment_elems(a.count, esize, h.segment_bytes);
    // An empty buffer still makes one (empty) segment: its arena ops check that every rank
    // of the node issued the same op, as for any size.
    for (int64_t lo = 0; lo < a.count || (lo == 0 && segs_.empty()); lo += e) {
      Segment sg;
      sg.lo = lo;
      sg.count = std::min(e, a.count - lo);
      sg.len = chunk_len(sg.count, h.per_node, h.local);
      sg.mine = at(a.out, lo + chunk_begin(sg.count, h.per_node, h.local), esize);
      segs_.push_back(std::move(sg));
    }
    const int n = static_cast<int>(segs_.size());
    for (int s = 0; s < std::min(n, kRingsInFlight); ++s) add_shm(false, s, esize);
    for (int s = 0; s < n; ++s) {
      add_shm(true, s, esize);
      if (s + kRingsInFlight < n) add_shm(false, s + kRingsInFlight, esize);
    }
  }

  PollResult poll() {
    bool any = false;
    for (;;) {
      bool moved = false;
      // The arena's next op; an all-gather waits for its segment's ring.
      while (next_ < shm_.size()) {
        const Step& st = steps_[next_];
        Segment& sg = segs_[static_cast<size_t>(st.seg)];
        if (st.gather && !sg.ring_done) break;
        const PollResult r = shm_[next_]();
        if (r == PollResult::Progressed) moved = true;
        if (r != PollResult::Done) break;
        shm_[next_] = nullptr;
        ++next_;
        moved = true;
        if (!st.gather) {
          const int64_t tag_seq = seq_ * kMaxSegments + st.seg;
          sg.ring = make_ring(h_.inter, tag_seq, {RingKind::AllReduce, a_.type, a_.op, sg.len, sg.mine, sg.mine});
        }
      }
      for (Segment& sg : segs_) {
        if (!sg.ring) continue;
        const PollResult r = sg.ring();
        if (r == PollResult::Progressed) moved = true;
        if (r == PollResult::Done) {
          sg.ring = nullptr;  // releases its scratch
          sg.ring_done = true;
          moved = true;
        }
      }
      if (!moved) break;
      any = true;
    }
    if (next_ == shm_.size()) return PollResult::Done;  // the last all-gather ran after its ring
    return any ? PollResult::Progressed : PollResult::Waiting;
  }

 private:
  struct Segment {
    int64_t lo = 0, count = 0, len = 0;  // elements of the buffer; this rank's local chunk of them
    void* mine = nullptr;                // that local chunk, in place
    PhasePoll ring;                      // while in flight
    bool ring_done = false;
  };
  struct Step {
    bool gather;
    int seg;
  };
  void add_shm(bool gather, int s, int64_t esize) {
    const Segment& sg = segs_[static_cast<size_t>(s)];
    void* seg_buf = at(a_.out, sg.lo, esize);
    steps_.push_back({gather, s});
    shm_.push_back(gather ? make_shm(h_.node, {RingKind::AllGather, a_.type, ReduceOp::Sum, sg.count, sg.mine, seg_buf})
                          : make_shm(h_.node, {RingKind::ReduceScatter, a_.type, a_.op, sg.count, seg_buf, sg.mine}));
  }

  const Hierarchy& h_;
  int64_t seq_;
  RingArgs a_;
  std::vector<Segment> segs_;
  std::vector<Step> steps_;     // the arena's ops of this all_reduce, in the order made
  std::vector<PhasePoll> shm_;  // [i]: steps_[i]
  size_t next_ = 0;             // the arena's next op
};

PhasePoll all_reduce(const Hierarchy& h, int64_t seq, const RingArgs& a) {
  auto pipe = std::make_shared<Pipeline>(h, seq, a);
  return [pipe] { return pipe->poll(); };
}

// For each node block k: a shared-memory reduce-scatter over this node gives this rank the
// node's partial sum of chunk (k, l) into region k of `sums`; then the ring reduce-scatter of
// `sums` (K regions of c) over sub-ring l leaves this rank's own chunk fully reduced.
PhasePoll reduce_scatter(const Hierarchy& h, int64_t seq, const RingArgs& a) {
  const int64_t esize = static_cast<int64_t>(element_size(a.type));
  const int k = h.nodes;
  Blocks b{h, a.count, (a.count + k * h.per_node - 1) / (k * h.per_node), esize};
  const int64_t c = b.c;
  auto sums = take_scratch(static_cast<size_t>(k * c * esize));
  std::vector<std::shared_ptr<std::byte>> keep{sums};
  std::vector<PhasePoll> phases;
  for (int node = 0; node < k; ++node) {
    const void* src = at(a.in, chunk_begin(a.count, b.n(), b.rank_of(node, 0)), esize);
    if (!b.direct(node)) {
      auto staged = take_scratch(static_cast<size_t>(b.block_elems() * esize));
      for (int l = 0; l < h.per_node; ++l) {
        const int r = b.rank_of(node, l);
        const int64_t len = chunk_len(a.count, b.n(), r);
        std::byte* dst = at(staged.get(), l * c, esize);
        std::memcpy(dst, at(a.in, chunk_begin(a.count, b.n(), r), esize), static_cast<size_t>(len * esize));
        std::memset(dst + len * esize, 0, static_cast<size_t>((c - len) * esize));
      }
      src = staged.get();
      keep.push_back(std::move(staged));
    }
    phases.push_back(make_shm(
        h.node, {RingKind::ReduceScatter, a.type, a.op, b.block_elems(), src, at(sums.get(), node * c, esize)}));
  }
  const int me = b.rank_of(h.node_index, h.local);
  const int64_t mine = chunk_len(a.count, b.n(), me);
  // The ring writes c elements: straight into `out` when this rank's chunk is that long.
  std::shared_ptr<std::byte> tail = mine == c ? nullptr : take_scratch(static_cast<size_t>(c * esize));
  void* ring_out = tail ? tail.get() : a.out;
  phases.push_back(make_ring(h.inter, seq, {RingKind::ReduceScatter, a.type, a.op, k * c, sums.get(), ring_out}));
  auto chain = std::make_shared<Chain>(std::move(phases), [keep, tail, out = a.out, bytes = mine * esize] {
    if (tail) std::memcpy(out, tail.get(), static_cast<size_t>(bytes));
  });
  return [chain] { return chain->poll(); };
}

// The reverse: the ring all-gather over sub-ring l collects chunk (k, l) of every node k into
// region k of `parts`; then for each node block k a shared-memory all-gather over this node
// puts the block together in `out` (or its staging copy, copied out at the end).
PhasePoll all_gather(const Hierarchy& h, int64_t seq, const RingArgs& a) {
  const int64_t esize = static_cast<int64_t>(element_size(a.type));
  const int k = h.nodes;
  Blocks b{h, a.count, (a.count + k * h.per_node - 1) / (k * h.per_node), esize};
  const int64_t c = b.c;
  auto parts = take_scratch(static_cast<size_t>(k * c * esize));
  const int me = b.rank_of(h.node_index, h.local);
  const int64_t mine = chunk_len(a.count, b.n(), me);
  std::byte* own = at(parts.get(), h.node_index * c, esize);
  const void* ring_in = a.in;
  if (mine < c) {  // the ring sends c elements of this rank's chunk: pad it in place
    std::memcpy(own, a.in, static_cast<size_t>(mine * esize));
    std::memset(own + mine * esize, 0, static_cast<size_t>((c - mine) * esize));
    ring_in = own;
  }
  std::vector<PhasePoll> phases;
  phases.push_back(make_ring(h.inter, seq, {RingKind::AllGather, a.type, ReduceOp::Sum, k * c, ring_in, parts.get()}));
  struct Staged {
    int node;
    std::shared_ptr<std::byte> data;
  };
  std::vector<Staged> staged;
  for (int node = 0; node < k; ++node) {
    void* dst = at(a.out, chunk_begin(a.count, b.n(), b.rank_of(node, 0)), esize);
    if (!b.direct(node)) {
      staged.push_back({node, take_scratch(static_cast<size_t>(b.block_elems() * esize))});
      dst = staged.back().data.get();
    }
    phases.push_back(make_shm(
        h.node, {RingKind::AllGather, a.type, ReduceOp::Sum, b.block_elems(), at(parts.get(), node * c, esize), dst}));
  }
  auto chain = std::make_shared<Chain>(std::move(phases), [parts, staged, b, out = a.out] {
    for (const Staged& s : staged) {
      for (int l = 0; l < b.h.per_node; ++l) {
        const int r = b.rank_of(s.node, l);
        std::memcpy(at(out, chunk_begin(b.count, b.n(), r), b.esize), at(s.data.get(), l * b.c, b.esize),
                    static_cast<size_t>(chunk_len(b.count, b.n(), r) * b.esize));
      }
    }
  });
  return [chain] { return chain->poll(); };
}

}  // namespace

std::shared_ptr<Hierarchy> Hierarchy::create(MPI_Comm comm, int rank, int size, const NodeSplit& nodes) {
  if (nodes.size == size) return nullptr;  // one node (every rank sees the same)
  int mode = -1;
  try {
    mode = detail::hierarchical_mode();  // validated at init; a value changed since reads as flat
  } catch (const std::exception&) {
    mode = 0;
  }
  int64_t segment = kDefaultHierSegmentBytes;
  try {
    segment = detail::env_count("STRATA_MPI_HIER_SEGMENT_BYTES", kDefaultHierSegmentBytes, "byte count");
  } catch (const std::exception&) {  // validated at init
  }
  // {max L, -min L, flat asked anywhere, forced anywhere, largest segment}
  int64_t mine[5] = {nodes.size, -nodes.size, mode == 0 ? 1 : 0, mode == 1 ? 1 : 0, segment}, all[5] = {};
  STRATA_MPI(MPI_Allreduce(mine, all, 5, MPI_INT64_T, MPI_MAX, comm));
  const int per_node = static_cast<int>(all[0]);
  if (per_node != -all[1] || per_node < 2 || all[2] != 0) return nullptr;

  auto h = std::make_shared<Hierarchy>();
  h->per_node = per_node;
  h->nodes = size / per_node;
  h->local = nodes.rank;
  h->forced = all[3] != 0;
  h->segment_bytes = all[4];
  h->node = ShmArena::create(nodes.comm, nodes.rank, nodes.size, nodes.size);
  // Sub-ring l, its nodes in the order of their lowest group rank (the same for every l).
  int leader = 0;
  STRATA_MPI(MPI_Allreduce(&rank, &leader, 1, MPI_INT, MPI_MIN, nodes.comm));
  STRATA_MPI(MPI_Comm_split(comm, nodes.rank, leader, &h->inter.comm));
  STRATA_MPI(MPI_Comm_set_errhandler(h->inter.comm, MPI_ERRORS_RETURN));
  STRATA_MPI(MPI_Comm_rank(h->inter.comm, &h->inter.rank));
  STRATA_MPI(MPI_Comm_size(h->inter.comm, &h->inter.size));
  int* tag_ub = nullptr;
  int has_tag_ub = 0;
  STRATA_MPI(MPI_Comm_get_attr(h->inter.comm, MPI_TAG_UB, &tag_ub, &has_tag_ub));
  if (has_tag_ub && tag_ub) h->inter.tag_ub = *tag_ub;
  h->node_index = h->inter.rank;
  // Where every group rank sits, and whether every node has its arena.
  int place[3] = {h->node != nullptr ? 1 : 0, h->node_index, h->local};
  std::vector<int> places(static_cast<size_t>(3 * size));
  STRATA_MPI(MPI_Allgather(place, 3, MPI_INT, places.data(), 3, MPI_INT, comm));
  h->group_rank.assign(static_cast<size_t>(size), -1);
  bool ok = h->inter.size == h->nodes;
  for (int r = 0; r < size; ++r) {
    const int* p = &places[static_cast<size_t>(3 * r)];
    ok = ok && p[0] == 1 && p[1] >= 0 && p[1] < h->nodes && p[2] >= 0 && p[2] < per_node;
    if (ok) h->group_rank[static_cast<size_t>(p[2] * h->nodes + p[1])] = r;
  }
  int all_ok = ok ? 1 : 0, agreed = 0;
  STRATA_MPI(MPI_Allreduce(&all_ok, &agreed, 1, MPI_INT, MPI_MIN, comm));
  if (!agreed) {
    h->free_comms();
    return nullptr;
  }
  return h;
}

void Hierarchy::free_comms() {
  if (inter.comm != MPI_COMM_NULL) MPI_Comm_free(&inter.comm);
}

int64_t hier_segment_elems(int64_t count, int64_t element_bytes, int64_t segment_bytes) {
  if (count <= 0 || segment_bytes <= 0) return std::max<int64_t>(count, 1);
  const int64_t fewest = (count + kMaxSegments - 1) / kMaxSegments;
  return std::max({segment_bytes / element_bytes, fewest, int64_t{1}});
}

bool use_hierarchical(const GroupState& g, int64_t bytes) {
  if (!g.hier || g.size < 2) return false;
  return g.hier->forced || use_ring(bytes, g.size);
}

void start_hierarchical(Op& op, const RingArgs& args) {
  STRATA_CHECK(op.group && op.group->hier, "hierarchical collective: the group spans no even set of nodes");
  const Hierarchy& h = *op.group->hier;
  PhasePoll poll = args.kind == RingKind::AllReduce       ? all_reduce(h, op.seq, args)
                   : args.kind == RingKind::ReduceScatter ? reduce_scatter(h, op.seq, args)
                                                          : all_gather(h, op.seq, args);
  // The hierarchy lives with the group, which outlives the op (op.group holds it).
  op.poll = [poll = std::move(poll)](Op&) { return poll(); };
}

}  // namespace strata::dist::mpi
