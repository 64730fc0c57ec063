#pragma once
// Our own ring reduce-scatter, all-gather and all-reduce (= the two one after the other) over
// MPI_Isend/MPI_Irecv, driven by the engine's poll (engine.h): non-blocking throughout, so
// timeouts and the missing-rank report work as for any op.
//
// Why: Open MPI 4.1's non-blocking MPI_Iallreduce (libnbc) is 1.6-2.8x slower than its
// blocking MPI_Allreduce for large buffers, and a blocking call on the worker would hang
// the process when a peer dies. See docs/distributed.md ("Algorithms").
//
// Layout: the buffer of M elements is cut into N chunks by the ProcessGroup rule (chunk r =
// [r*c, min((r+1)*c, M)), c = ceil(M/N)), each chunk into segments; a segment is the unit
// that moves. Reduce-scatter step s (0..N-2): rank r sends chunk r-s-1 to rank r+1 and
// receives chunk r-s-2 from rank r-1, which it combines with its own contribution; after
// N-1 steps rank r holds chunk r fully reduced. All-gather step t (0..N-2): rank r sends
// chunk r-t and receives chunk r-t-1. Segments pipeline: a segment moves on to the next
// step as soon as it has arrived (and been reduced), while later segments are in flight.
//
// Every chunk is reduced in one fixed order (contributions of ranks j+1, j+2, ..., j for
// chunk j, each partial computed once, on one rank) and then copied as bytes, so the
// result is bitwise identical on every rank.
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "distributed/mpi/engine.h"
#include "strata/distributed/types.h"

namespace strata::dist::mpi {

enum class RingKind { AllReduce, ReduceScatter, AllGather };

struct RingArgs {
  RingKind kind = RingKind::AllReduce;
  // MPI_FLOAT, MPI_DOUBLE, MPI_INT32_T or MPI_INT64_T (all_gather also MPI_UINT16_T)
  MPI_Datatype type = MPI_FLOAT;
  ReduceOp op = ReduceOp::Sum;  // Avg reduces as Sum (the caller divides)
  int64_t count = 0;            // M, the same on every rank
  // all_reduce: in == out, M elements, the result replaces the input.
  // reduce_scatter: in has M elements (read only), out this rank's chunk.
  // all_gather: in is this rank's chunk (it may be that chunk inside out), out M elements.
  const void* in = nullptr;
  void* out = nullptr;
};

// Whether a collective of `bytes` (the full buffer: all_reduce's tensor, reduce_scatter's
// input, all_gather's output) takes the ring; below the threshold MPI's own non-blocking
// collective is as fast. STRATA_MPI_RING_MIN_BYTES overrides the threshold; it must then be
// the same on every rank.
bool use_ring(int64_t bytes, int group_size);

// Called from the op's last stage (worker thread): sets op.poll to run the ring on
// op.group's ring communicator. The buffers must stay valid while the op lives.
void start_ring(Op& op, const RingArgs& args);

// The ranks a ring runs over: a communicator of its own (no other traffic), this rank's
// place in it and the largest tag it allows. A group's ring is {g.ring, g.rank, g.size};
// the hierarchical collectives (hierarchy.h) run one over the ranks of a local index.
struct RingPeers {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  int tag_ub = 32767;
};

// One step of a collective's progress (the engine's poll, without the Op); Done once.
using PhasePoll = std::function<PollResult()>;

// A ring collective over `peers` as op #seq (its tag), ready to be polled: what start_ring
// installs, for callers that chain it with other phases (hierarchy.cpp).
PhasePoll make_ring(const RingPeers& peers, int64_t seq, const RingArgs& args);

// Scratch memory from the ring's pool (reused across ops; at least `bytes`, 64-byte
// aligned): returned to the pool when the last reference goes.
std::shared_ptr<std::byte> take_scratch(size_t bytes);

}  // namespace strata::dist::mpi
