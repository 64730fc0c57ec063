#pragma once
// All-reduce, reduce-scatter and all-gather through shared memory, for MPI groups whose
// ranks all live on one node (the group's ShmArena, shm_arena.h). Like the ring (ring.h),
// each op is a non-blocking state machine driven by the engine's poll (engine.h): it never
// waits inside poll, so timeouts, the missing-rank report and the "caller drives" path work
// as for any op.
//
// Two paths, chosen per op alike on every rank (from the op's size and the arena's
// configuration, which is group rank 0's):
// - Slots. Every rank publishes a stream of pieces into its two slot halves (piece g into
//   half g % 2, then pub = g + 1); peers read (copy or reduce from) the piece and
//   acknowledge it (ack = g + 1); a rank overwrites a half only once every peer has
//   acknowledged the piece before. So a rank writes piece g + 1 while its peers still read
//   piece g. Reduce-scatter round t: rank r publishes segment t of every chunk but its
//   own; rank r reduces segment t of chunk r from the N contributions. All-gather round t:
//   rank r publishes segment t of its chunk, the peers copy it into place. An all-reduce
//   is the reduce-scatter rounds and then the all-gather rounds of its reduced chunk.
// - CMA (cross-memory attach, process_vm_readv): a rank publishes its buffer's address and
//   the peers read straight from it, one copy instead of two; for reductions rank r reads
//   chunk r of every peer (piece by piece into scratch) and reduces it, and an all-reduce
//   then reads every peer's reduced chunk. A rank's op completes once every peer has
//   finished reading its buffer. Used only where the arena agreed on it (create).
//
// Chunk r = [r*c, min((r+1)*c, M)), c = ceil(M/N) (the ProcessGroup rule). Chunk j is
// reduced by rank j alone, in rank order ((x0 + x1) + x2) + ..., and then copied as bytes:
// the result is bitwise identical on every rank, on either path.
//
// The ops of one group run one at a time on a rank, in issue order (the same on every
// rank); the flags count up across ops, so an op's first writes wait for the peers to have
// finished with the previous op's pieces.
#include <cstdint>
#include <memory>

#include "distributed/mpi/engine.h"
#include "distributed/mpi/ring.h"

namespace strata::dist::mpi {

// The same arguments as the ring's (RingArgs: kind, wire type, op, count, in, out).
using ShmArgs = RingArgs;

// Whether a collective of `bytes` (the full buffer, as for use_ring) on `g` goes through
// shared memory: the group has an arena and `bytes` lies in its size window.
bool use_shm(const GroupState& g, int64_t bytes);

// Called from the op's last stage: sets op.poll to run the collective through op.group's
// arena. The buffers must stay valid while the op lives.
void start_shm(Op& op, const ShmArgs& args);

// The same collective through `arena`, ready to be polled (what start_shm installs), for
// callers that chain it with other phases (hierarchy.cpp). It takes its place in the
// arena's op order now: the arena runs its ops one at a time in the order they were made.
PhasePoll make_shm(const std::shared_ptr<ShmArena>& arena, const ShmArgs& args);

}  // namespace strata::dist::mpi
