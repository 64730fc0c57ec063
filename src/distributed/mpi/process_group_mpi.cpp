#include "distributed/mpi/process_group_mpi.h"

#include <climits>
#include <cstdio>
#include <cstring>

#include "distributed/env_settings.h"
#include "distributed/group_checks.h"
#include "distributed/mpi/hierarchy.h"
#include "distributed/mpi/ring.h"
#include "distributed/mpi/shm_collectives.h"
#include "strata/core/error.h"

namespace strata::dist::mpi {
namespace {

using detail::describe;
using detail::overlap;
using detail::Signature;

// ------------------------------------------------------------------ Work

class WorkMPI final : public Work {
 public:
  explicit WorkMPI(std::shared_ptr<WorkState> s) : s_(std::move(s)) {}
  bool is_completed() override { return s_->done_flag.load(); }
  // The engine enforces the op's deadline, so an unbounded wait still ends. The waiting
  // thread drives MPI itself while it can (engine.h).
  void wait() override {
    block(Clock::time_point::max());
    rethrow();
  }
  void synchronize() override { wait(); }
  void synchronize(std::chrono::milliseconds timeout) override {
    if (!block(Clock::now() + timeout)) {
      std::string who;
      if (s_->group && s_->seq >= 0) {
        std::vector<int> missing = s_->group->missing(s_->seq);
        who =
            missing.empty() ? "every rank had entered it" : s_->group->describe_ranks(missing) + " had not reached it";
      }
      STRATA_FAIL(s_->title, ": not completed within ", timeout.count(), " ms (synchronize); ", who,
                  ". The op is still pending.");
    }
    rethrow();
  }

 private:
  // Whether the op is done by `until`.
  bool block(Clock::time_point until) {
    if (s_->done_flag.load()) return true;
    if (Engine* e = Engine::get()) {
      e->wait(*s_, until);
    } else {
      // Finalized: every op was published before MPI_Finalize.
      std::unique_lock<std::mutex> lk(s_->mu);
      s_->cv.wait_until(lk, until, [&] { return s_->done; });
    }
    std::lock_guard<std::mutex> lk(s_->mu);
    return s_->done;
  }
  // The engine's message already names the op and the source line that detected it.
  void rethrow() {
    std::string error;
    {
      std::lock_guard<std::mutex> lk(s_->mu);
      error = s_->error;
    }
    if (error.empty()) return;
    int rank = error_rank();
    throw Error(rank >= 0 ? "[rank " + std::to_string(rank) + "] " + error : error);
  }
  std::shared_ptr<WorkState> s_;
};

// ------------------------------------------------------------------ dtypes

bool is_16bit(DType d) { return d == DType::BFloat16 || d == DType::Float16; }

// The type data moves as: 16-bit floats move as raw 2-byte words.
MPI_Datatype wire_type(DType d) {
  switch (d) {
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::BFloat16:
    case DType::Float16: return MPI_UINT16_T;
    case DType::Int32: return MPI_INT32_T;
    case DType::Int64: return MPI_INT64_T;
    case DType::Bool: return MPI_UINT8_T;  // moved, never reduced (check_average_dtype)
  }
  STRATA_FAIL("dist: unknown dtype ", static_cast<int>(d));
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return MPI_SUM;
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Min: return MPI_MIN;
    case ReduceOp::Product: return MPI_PROD;
  }
  STRATA_FAIL("dist: unknown reduce op ", static_cast<int>(op));
}

void to_float(const void* src, DType d, float* dst, int64_t n) {
  if (d == DType::BFloat16) {
    const auto* s = static_cast<const bfloat16*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
  } else {
    const auto* s = static_cast<const float16*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
  }
}

void from_float(const float* src, DType d, void* dst, int64_t n) {
  if (d == DType::BFloat16) {
    auto* o = static_cast<bfloat16*>(dst);
    for (int64_t i = 0; i < n; ++i) o[i] = bfloat16(src[i]);
  } else {
    auto* o = static_cast<float16*>(dst);
    for (int64_t i = 0; i < n; ++i) o[i] = float16(src[i]);
  }
}

void divide(void* data, MPI_Datatype type, int64_t n, int by) {
  if (type == MPI_FLOAT) {
    auto* p = static_cast<float*>(data);
    for (int64_t i = 0; i < n; ++i) p[i] /= static_cast<float>(by);
  } else if (type == MPI_DOUBLE) {
    auto* p = static_cast<double*>(data);
    for (int64_t i = 0; i < n; ++i) p[i] /= static_cast<double>(by);
  }
}

// After a reduction of n elements into `out`: 16-bit floats were reduced in float32 (in
// `wide`) and round back once; Avg divides the sum by the group size.
void finish_reduction(void* out, std::vector<float>& wide, DType d, ReduceOp rop, int64_t n, int size) {
  if (is_16bit(d)) {
    if (rop == ReduceOp::Avg) divide(wide.data(), MPI_FLOAT, n, size);
    from_float(wide.data(), d, out, n);
  } else if (rop == ReduceOp::Avg) {
    divide(out, wire_type(d), n, size);
  }
}

int mpi_count(int64_t n, const char* op) {
  STRATA_CHECK(n <= INT_MAX, op, ": ", n, " elements exceed MPI's int count (", INT_MAX,
               "); split the tensor into smaller pieces");
  return static_cast<int>(n);
}

// ------------------------------------------------------------------ algorithm

// Who carries a collective of `bytes` (the full buffer): shared memory when the group is on
// one node and the size is in its window; for a group over several nodes with the same
// number of ranks on each, the hierarchical collectives from the ring's threshold; else our
// ring from its threshold, else MPI's own non-blocking collective. Depends only on what
// every rank passes and agreed settings.
enum class Path { Mpi, Ring, Shm, Hier };

const char* path_name(Path p) {
  switch (p) {
    case Path::Mpi: return "MPI's non-blocking collective";
    case Path::Ring: return "the flat ring";
    case Path::Shm: return "shared memory";
    case Path::Hier: return "the hierarchical path";
  }
  return "?";
}

// STRATA_DEBUG_PATHS=1: group rank 0 says which path each kind of op takes, the first time
// (one line per group, op kind and path).
void log_path(GroupState& g, const char* kind, Path p, int64_t bytes) {
  if (!detail::debug_paths() || g.rank != 0) return;
  const std::string key = std::string(kind) + "/" + path_name(p);
  {
    std::lock_guard<std::mutex> lk(g.mu);
    if (!g.logged_paths.insert(key).second) return;
  }
  std::string shape =
      g.hier ? " (" + std::to_string(g.hier->nodes) + " nodes x " + std::to_string(g.hier->per_node) + " ranks)" : "";
  std::fprintf(stderr, "strata: group '%s' of %d ranks%s: %s of %lld bytes takes %s\n", g.name.c_str(), g.size,
               shape.c_str(), kind, static_cast<long long>(bytes), path_name(p));
}

Path choose_path(GroupState& g, const char* kind, int64_t bytes) {
  Path p = Path::Mpi;
  if (use_shm(g, bytes)) p = Path::Shm;
  else if (use_hierarchical(g, bytes)) p = Path::Hier;
  else if (use_ring(bytes, g.size)) p = Path::Ring;
  if (g.size > 1) log_path(g, kind, p, bytes);
  return p;
}

// ------------------------------------------------------------------ debug signatures

// STRATA_DEBUG_COLLECTIVES=1: before the op, every rank gathers every rank's signature; a
// mismatch fails the op on every rank alike (all see the same data), so the group stays
// consistent and usable.
void add_signature_stage(Op& op, Signature sig) {
  auto mine = std::make_shared<Signature>(sig);
  auto all = std::make_shared<std::vector<Signature>>(static_cast<size_t>(op.group->size));
  auto main = std::move(op.stages.front());
  op.stages.front() = [mine, all](Op& o) {
    mine->seq = o.seq;
    STRATA_MPI(MPI_Iallgather(mine.get(), sizeof(Signature), MPI_BYTE, all->data(), sizeof(Signature), MPI_BYTE,
                              o.group->comm, &o.add_request()));
  };
  op.stages.insert(op.stages.begin() + 1, [all, main](Op& o) {
    std::string mismatch = detail::signature_mismatch(*all, o.group->name);
    if (!mismatch.empty()) {
      o.failure_is_collective = true;  // every rank compares the same gathered signatures
      STRATA_FAIL(mismatch);
    }
    main(o);
  });
}

}  // namespace

// ------------------------------------------------------------------ ProcessGroupMPI

ProcessGroupMPI::ProcessGroupMPI(std::shared_ptr<GroupState> state)
    : ProcessGroup(state->rank, state->size, state->name, state->global_ranks), state_(std::move(state)) {}

ProcessGroupMPI::~ProcessGroupMPI() {
  Engine* e = Engine::get();
  if (!e) return;  // finalized: MPI_Finalize released the communicators
  auto op = std::make_unique<Op>();
  op->kind = "free";
  op->sequenced = false;
  op->group = state_;
  op->stages.emplace_back([e](Op& o) {
    // MPI lets pending requests on a freed communicator complete normally. `comm` and
    // `ring` carry only matched traffic (collectives, our ring, the user's point-to-point):
    // every message sent to this rank on them is one that its own ops receive. The watch
    // channel's announcements are sends nobody waits for: a peer's may still be on the way,
    // so the watch is freed only once every peer has retired its end (Engine::retire_watch).
    e->retire_watch(*o.group);
    if (o.group->ring != MPI_COMM_NULL) MPI_Comm_free(&o.group->ring);
    if (o.group->hier) o.group->hier->free_comms();
    if (o.group->comm != MPI_COMM_NULL) MPI_Comm_free(&o.group->comm);
  });
  try {
    e->submit(std::move(op));
  } catch (const std::exception&) {
    // Shutting down: MPI_Finalize releases it.
  }
}

Engine& ProcessGroupMPI::engine(const char* op) const {
  Engine* e = Engine::get();
  STRATA_CHECK(e != nullptr, op, " on group '", name_, "': the distributed runtime is ",
               Engine::finalized() ? "finalized (dist::finalize was called); groups cannot be used afterwards"
                                   : "not initialised");
  std::lock_guard<std::mutex> lk(state_->mu);
  STRATA_CHECK(state_->broken.empty(), op, " on group '", name_,
               "': the group is unusable after an earlier failure: ", state_->broken);
  return *e;
}

std::unique_ptr<Op> ProcessGroupMPI::make_op(const OpDescription& desc) {
  auto op = std::make_unique<Op>();
  op->kind = desc.name;
  op->detail = desc.detail;
  op->group = state_;
  op->timeout = timeout_;
  op->work = std::make_shared<WorkState>();
  return op;
}

WorkPtr ProcessGroupMPI::submit(std::unique_ptr<Op> op, const OpDescription& desc) {
  Engine& e = engine(desc.name);
  if (desc.signature && e.debug_collectives()) add_signature_stage(*op, *desc.signature);
  auto work = op->work;
  e.submit(std::move(op));
  return std::make_unique<WorkMPI>(std::move(work));
}

// ------------------------------------------------------------------ collectives

// 16-bit floats reduce in float32: `tmp` holds the converted values, read back in finish.
WorkPtr ProcessGroupMPI::do_all_reduce(Tensor& tensor, ReduceOp rop, const OpDescription& desc) {
  const DType d = tensor.dtype();
  const int count = mpi_count(tensor.numel(), desc.name);
  auto op = make_op(desc);
  auto tmp = std::make_shared<std::vector<float>>();
  const int size = size_;
  // Large buffers take shared memory (one node, shm_collectives.h) or our ring (ring.h);
  // the choice depends only on what every rank passes.
  const Path path = choose_path(*state_, "all_reduce", count * (is_16bit(d) ? 4 : static_cast<int64_t>(dtype_size(d))));
  op->stages.emplace_back([tensor, rop, tmp, count, d, path](Op& o) {
    void* buf = tensor.raw_data();
    MPI_Datatype type = wire_type(d);
    if (is_16bit(d)) {
      tmp->resize(static_cast<size_t>(count));
      to_float(buf, d, tmp->data(), count);
      buf = tmp->data();
      type = MPI_FLOAT;
    }
    if (path == Path::Shm) return start_shm(o, {RingKind::AllReduce, type, rop, count, buf, buf});
    if (path == Path::Ring) return start_ring(o, {RingKind::AllReduce, type, rop, count, buf, buf});
    if (path == Path::Hier) return start_hierarchical(o, {RingKind::AllReduce, type, rop, count, buf, buf});
    STRATA_MPI(MPI_Iallreduce(MPI_IN_PLACE, buf, count, type, mpi_op(rop), o.group->comm, &o.add_request()));
  });
  op->finish = [tensor, rop, tmp, count, d, size](Op&) {
    finish_reduction(tensor.raw_data(), *tmp, d, rop, count, size);
  };
  return submit(std::move(op), desc);
}

WorkPtr ProcessGroupMPI::do_broadcast(Tensor& tensor, int root, const OpDescription& desc) {
  const int count = mpi_count(tensor.numel(), desc.name);
  const DType d = tensor.dtype();
  auto op = make_op(desc);
  op->stages.emplace_back([tensor, count, d, root](Op& o) {
    STRATA_MPI(MPI_Ibcast(tensor.raw_data(), count, wire_type(d), root, o.group->comm, &o.add_request()));
  });
  return submit(std::move(op), desc);
}

WorkPtr ProcessGroupMPI::do_all_gather(Tensor& out, const Tensor& in, const OpDescription& desc) {
  const int64_t m = out.numel();
  mpi_count(m, desc.name);
  const int64_t mine = chunk_size(m, rank_);
  const DType d = out.dtype();
  auto counts = std::make_shared<std::vector<int>>();
  auto displs = std::make_shared<std::vector<int>>();
  for (int r = 0; r < size_; ++r) {
    counts->push_back(static_cast<int>(chunk_size(m, r)));
    displs->push_back(static_cast<int>(chunk_begin(m, r)));
  }
  const size_t esize = dtype_size(d);
  const bool in_place = mine > 0 && static_cast<const char*>(in.raw_data()) ==
                                        static_cast<const char*>(out.raw_data()) +
                                            static_cast<size_t>(displs->at(static_cast<size_t>(rank_))) * esize;
  // Any other overlap: send from a copy (MPI forbids aliased send and receive buffers).
  Tensor src = (!in_place && overlap(out, in)) ? in.clone() : in;
  auto op = make_op(desc);
  const Path path = choose_path(*state_, "all_gather", m * static_cast<int64_t>(esize));
  op->stages.emplace_back([out, src, counts, displs, d, in_place, mine, m, path](Op& o) {
    MPI_Datatype t = wire_type(d);
    if (path == Path::Shm)
      return start_shm(o, {RingKind::AllGather, t, ReduceOp::Sum, m, src.raw_data(), out.raw_data()});
    if (path == Path::Ring)
      return start_ring(o, {RingKind::AllGather, t, ReduceOp::Sum, m, src.raw_data(), out.raw_data()});
    if (path == Path::Hier)
      return start_hierarchical(o, {RingKind::AllGather, t, ReduceOp::Sum, m, src.raw_data(), out.raw_data()});
    const void* sbuf = in_place ? MPI_IN_PLACE : src.raw_data();
    STRATA_MPI(MPI_Iallgatherv(sbuf, static_cast<int>(mine), t, out.raw_data(), counts->data(), displs->data(), t,
                               o.group->comm, &o.add_request()));
  });
  return submit(std::move(op), desc);
}

WorkPtr ProcessGroupMPI::do_reduce_scatter(Tensor& out, const Tensor& in, ReduceOp rop, const OpDescription& desc) {
  const DType d = in.dtype();
  const int64_t m = in.numel();
  mpi_count(m, desc.name);
  const int64_t mine = chunk_size(m, rank_);
  auto counts = std::make_shared<std::vector<int>>();
  for (int r = 0; r < size_; ++r) counts->push_back(static_cast<int>(chunk_size(m, r)));
  Tensor src = overlap(out, in) ? in.clone() : in;
  auto tmp_in = std::make_shared<std::vector<float>>();
  auto tmp_out = std::make_shared<std::vector<float>>();
  const int size = size_;
  auto op = make_op(desc);
  const Path path = choose_path(*state_, "reduce_scatter", m * (is_16bit(d) ? 4 : static_cast<int64_t>(dtype_size(d))));
  op->stages.emplace_back([out, src, counts, rop, d, m, mine, tmp_in, tmp_out, path](Op& o) {
    const void* sbuf = src.raw_data();
    void* rbuf = out.raw_data();
    MPI_Datatype t = wire_type(d);
    if (is_16bit(d)) {
      tmp_in->resize(static_cast<size_t>(m));
      tmp_out->resize(static_cast<size_t>(mine));
      to_float(sbuf, d, tmp_in->data(), m);
      sbuf = tmp_in->data();
      rbuf = tmp_out->data();
      t = MPI_FLOAT;
    }
    if (path == Path::Shm) return start_shm(o, {RingKind::ReduceScatter, t, rop, m, sbuf, rbuf});
    if (path == Path::Ring) return start_ring(o, {RingKind::ReduceScatter, t, rop, m, sbuf, rbuf});
    if (path == Path::Hier) return start_hierarchical(o, {RingKind::ReduceScatter, t, rop, m, sbuf, rbuf});
    STRATA_MPI(MPI_Ireduce_scatter(sbuf, rbuf, counts->data(), t, mpi_op(rop), o.group->comm, &o.add_request()));
  });
  op->finish = [out, rop, d, mine, tmp_out, size](Op&) {
    finish_reduction(out.raw_data(), *tmp_out, d, rop, mine, size);
  };
  return submit(std::move(op), desc);
}

WorkPtr ProcessGroupMPI::do_all_to_all(Tensor& out, const Tensor& in, const OpDescription& desc) {
  const DType d = in.dtype();
  const int64_t n = in.numel();
  mpi_count(n, desc.name);
  const int k = static_cast<int>(n / size_);
  Tensor src = overlap(out, in) ? in.clone() : in;
  auto op = make_op(desc);
  op->stages.emplace_back([out, src, k, d](Op& o) {
    MPI_Datatype t = wire_type(d);
    STRATA_MPI(MPI_Ialltoall(src.raw_data(), k, t, out.raw_data(), k, t, o.group->comm, &o.add_request()));
  });
  return submit(std::move(op), desc);
}

namespace {

// MPI_Ialltoallv's counts and displacements (in elements) as MPI's ints: refused, naming
// the side, where a displacement (the elements before a rank's slice) or a count passes
// INT_MAX.
std::vector<int> int_counts(std::span<const int64_t> counts, std::vector<int>& displs, const char* side) {
  std::vector<int> out;
  int64_t at = 0;
  for (int64_t c : counts) {
    STRATA_CHECK(at + c <= INT_MAX, "all_to_all_v: ", side, " reaches element ", at + c,
                 ", beyond MPI's int counts and displacements (", INT_MAX,
                 "); exchange fewer rows per call or split the exchange");
    out.push_back(static_cast<int>(c));
    displs.push_back(static_cast<int>(at));
    at += c;
  }
  return out;
}

}  // namespace

WorkPtr ProcessGroupMPI::do_all_to_all_v(Tensor& out, const Tensor& in, std::span<const int64_t> out_counts,
                                         std::span<const int64_t> in_counts, const OpDescription& desc) {
  auto sdispls = std::make_shared<std::vector<int>>();
  auto rdispls = std::make_shared<std::vector<int>>();
  auto scounts = std::make_shared<std::vector<int>>(int_counts(in_counts, *sdispls, "in"));
  auto rcounts = std::make_shared<std::vector<int>>(int_counts(out_counts, *rdispls, "out"));
  const DType d = in.dtype();
  Tensor src = overlap(out, in) ? in.clone() : in;  // MPI forbids aliased send and receive buffers
  auto op = make_op(desc);
  op->stages.emplace_back([out, src, d, scounts, sdispls, rcounts, rdispls](Op& o) {
    MPI_Datatype t = wire_type(d);
    STRATA_MPI(MPI_Ialltoallv(src.raw_data(), scounts->data(), sdispls->data(), t, out.raw_data(), rcounts->data(),
                              rdispls->data(), t, o.group->comm, &o.add_request()));
  });
  return submit(std::move(op), desc);
}

WorkPtr ProcessGroupMPI::do_barrier(const OpDescription& desc) {
  auto op = make_op(desc);
  op->stages.emplace_back([](Op& o) { STRATA_MPI(MPI_Ibarrier(o.group->comm, &o.add_request())); });
  return submit(std::move(op), desc);
}

// ------------------------------------------------------------------ point to point

namespace {
constexpr int kTagP2P = 11;
}

WorkPtr ProcessGroupMPI::do_send(const Tensor& tensor, int dst, const OpDescription& desc) {
  const int count = mpi_count(tensor.numel(), desc.name);
  const DType d = tensor.dtype();
  auto op = make_op(desc);
  op->stages.emplace_back([tensor, count, d, dst](Op& o) {
    STRATA_MPI(MPI_Isend(tensor.raw_data(), count, wire_type(d), dst, kTagP2P, o.group->comm, &o.add_request(dst)));
  });
  return submit(std::move(op), desc);
}

WorkPtr ProcessGroupMPI::do_recv(Tensor& tensor, int src, const OpDescription& desc) {
  const int count = mpi_count(tensor.numel(), desc.name);
  const DType d = tensor.dtype();
  auto op = make_op(desc);
  op->stages.emplace_back([tensor, count, d, src](Op& o) {
    STRATA_MPI(MPI_Irecv(tensor.raw_data(), count, wire_type(d), src, kTagP2P, o.group->comm, &o.add_request(src)));
  });
  // A longer message fails in MPI (truncation); a shorter one is caught here.
  op->finish = [count, d, src](Op& o) {
    int got = 0;
    MPI_Get_count(&o.statuses.at(0), wire_type(d), &got);
    STRATA_CHECK(got == count, "recv: rank ", src, " sent ", got, " elements but the receive tensor has ", count);
  };
  return submit(std::move(op), desc);
}

// ------------------------------------------------------------------ split

std::unique_ptr<ProcessGroup> ProcessGroupMPI::do_split(const SplitPlan& plan, const OpDescription& desc) {
  // Stage 1 gathers (lowest rank, count, hash) from every rank so that all ranks validate
  // the whole partition identically before any of them enters the blocking MPI_Comm_split.
  using detail::SplitEntry;
  auto mine = std::make_shared<SplitEntry>(detail::split_entry(plan.ranks));
  auto all = std::make_shared<std::vector<SplitEntry>>(static_cast<size_t>(size_));
  auto result = std::make_shared<std::shared_ptr<GroupState>>();
  auto op = make_op(desc);
  op->stages.emplace_back([mine, all](Op& o) {
    STRATA_MPI(MPI_Iallgather(mine.get(), sizeof(SplitEntry), MPI_BYTE, all->data(), sizeof(SplitEntry), MPI_BYTE,
                              o.group->comm, &o.add_request()));
  });
  op->finish = [mine, all, result, new_name = plan.name, globals = plan.globals](Op& o) {
    detail::check_partition(o.group->name, *all);
    MPI_Comm comm;
    STRATA_MPI(MPI_Comm_split(o.group->comm, static_cast<int>(mine->lowest), o.group->rank, &comm));
    *result = make_group(comm, new_name, globals);
  };
  submit(std::move(op), desc)->wait();
  return std::make_unique<ProcessGroupMPI>(*result);
}

}  // namespace strata::dist::mpi
