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
      if (r != PollResult::Done) return (any || r == PollResult::Progressed) ? PollResult::Progressed : PollResult::Waiting;
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

// The staging buffer of reduce_scatter and all_gather: N regions of c elements, region
// l*K + n for the chunk of the rank with local index l on node n.
struct Staging {
  std::shared_ptr<std::byte> data;
  int64_t c = 0;  // ceil(M / N)
};

Staging make_staging(const Hierarchy& h, int64_t count, int64_t esize) {
  const int n = h.nodes * h.per_node;
  Staging s;
  s.c = (count + n - 1) / n;
  s.data = take_scratch(static_cast<size_t>(static_cast<int64_t>(n) * s.c * esize));
  return s;
}

PhasePoll all_reduce(const Hierarchy& h, int64_t seq, const RingArgs& a) {
  const int64_t esize = static_cast<int64_t>(element_size(a.type));
  const int64_t lo = chunk_begin(a.count, h.per_node, h.local), len = chunk_len(a.count, h.per_node, h.local);
  void* mine = at(a.out, lo, esize);
  std::vector<PhasePoll> phases;
  phases.push_back(make_shm(h.node, {RingKind::ReduceScatter, a.type, a.op, a.count, a.out, mine}));
  phases.push_back(make_ring(h.inter, seq, {RingKind::AllReduce, a.type, a.op, len, mine, mine}));
  phases.push_back(make_shm(h.node, {RingKind::AllGather, a.type, ReduceOp::Sum, a.count, mine, a.out}));
  auto chain = std::make_shared<Chain>(std::move(phases), nullptr);
  return [chain] { return chain->poll(); };
}

PhasePoll reduce_scatter(const Hierarchy& h, int64_t seq, const RingArgs& a) {
  const int64_t esize = static_cast<int64_t>(element_size(a.type));
  const int k = h.nodes, l_count = h.per_node, n = k * l_count;
  Staging s = make_staging(h, a.count, esize);
  const int64_t c = s.c;
  std::byte* base = s.data.get();
  for (int l = 0; l < l_count; ++l) {
    for (int node = 0; node < k; ++node) {
      const int r = h.group_rank[static_cast<size_t>(l * k + node)];
      const int64_t len = chunk_len(a.count, n, r);
      std::byte* dst = at(base, static_cast<int64_t>(l * k + node) * c, esize);
      std::memcpy(dst, at(a.in, chunk_begin(a.count, n, r), esize), static_cast<size_t>(len * esize));
      std::memset(dst + len * esize, 0, static_cast<size_t>((c - len) * esize));
    }
  }
  std::byte* super = at(base, static_cast<int64_t>(h.local) * k * c, esize);
  auto result = take_scratch(static_cast<size_t>(c * esize));
  std::vector<PhasePoll> phases;
  phases.push_back(make_shm(h.node, {RingKind::ReduceScatter, a.type, a.op, n * c, base, super}));
  phases.push_back(make_ring(h.inter, seq, {RingKind::ReduceScatter, a.type, a.op, k * c, super, result.get()}));
  const int me = h.group_rank[static_cast<size_t>(h.local * k + h.node_index)];
  const size_t bytes = static_cast<size_t>(chunk_len(a.count, n, me) * esize);
  auto chain = std::make_shared<Chain>(std::move(phases), [s, result, out = a.out, bytes] {
    std::memcpy(out, result.get(), bytes);
  });
  return [chain] { return chain->poll(); };
}

PhasePoll all_gather(const Hierarchy& h, int64_t seq, const RingArgs& a) {
  const int64_t esize = static_cast<int64_t>(element_size(a.type));
  const int k = h.nodes, l_count = h.per_node, n = k * l_count;
  Staging s = make_staging(h, a.count, esize);
  const int64_t c = s.c;
  std::byte* base = s.data.get();
  const int me = h.group_rank[static_cast<size_t>(h.local * k + h.node_index)];
  std::byte* own = at(base, static_cast<int64_t>(h.local * k + h.node_index) * c, esize);
  std::memcpy(own, a.in, static_cast<size_t>(chunk_len(a.count, n, me) * esize));
  std::byte* super = at(base, static_cast<int64_t>(h.local) * k * c, esize);
  std::vector<PhasePoll> phases;
  phases.push_back(make_ring(h.inter, seq, {RingKind::AllGather, a.type, ReduceOp::Sum, k * c, own, super}));
  phases.push_back(make_shm(h.node, {RingKind::AllGather, a.type, ReduceOp::Sum, n * c, super, base}));
  auto chain = std::make_shared<Chain>(std::move(phases), [s, ranks = h.group_rank, out = a.out, count = a.count, esize, k, l_count, n] {
    for (int l = 0; l < l_count; ++l) {
      for (int node = 0; node < k; ++node) {
        const int r = ranks[static_cast<size_t>(l * k + node)];
        std::memcpy(at(out, chunk_begin(count, n, r), esize),
                    at(s.data.get(), static_cast<int64_t>(l * k + node) * s.c, esize),
                    static_cast<size_t>(chunk_len(count, n, r) * esize));
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
  // {max L, -min L, flat asked anywhere, forced anywhere}
  int mine[4] = {nodes.size, -nodes.size, mode == 0 ? 1 : 0, mode == 1 ? 1 : 0}, all[4] = {};
  STRATA_MPI(MPI_Allreduce(mine, all, 4, MPI_INT, MPI_MAX, comm));
  const int per_node = all[0];
  if (per_node != -all[1] || per_node < 2 || all[2] != 0) return nullptr;

  auto h = std::make_shared<Hierarchy>();
  h->per_node = per_node;
  h->nodes = size / per_node;
  h->local = nodes.rank;
  h->forced = all[3] != 0;
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
