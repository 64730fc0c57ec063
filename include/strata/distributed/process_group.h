#pragma once
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "strata/distributed/types.h"
#include "strata/distributed/work.h"
#include "strata/tensor/tensor.h"

namespace strata::dist {

// One send or one receive within a ProcessGroup::batch_send_recv call: build it with
// P2POp::send(tensor, dst) or P2POp::recv(tensor, src) (group ranks).
struct P2POp {
  enum class Kind : uint8_t { Send, Recv };
  Kind kind = Kind::Send;
  Tensor tensor = {};  // send: the data; recv: where it lands (same size as the matching send)
  int peer = 0;        // group rank of the destination (send) or source (recv)

  static P2POp send(const Tensor& tensor, int dst) { return {Kind::Send, tensor, dst}; }
  static P2POp recv(const Tensor& tensor, int src) { return {Kind::Recv, tensor, src}; }
};

// What every rank must issue alike for one collective, compared across the group under
// STRATA_DEBUG_COLLECTIVES=1 (distributed/group_checks.h makes and compares them).
struct OpSignature {
  int32_t kind = 0;     // an OpType, or a split (detail::kSplitKind)
  int32_t reduce = -1;  // -1 where a field does not apply
  int32_t dtype = -1;
  int32_t root = -1;
  int64_t numel = 0;
  int64_t seq = 0;  // the op's sequence number in the group (the backend fills it in)
  bool operator==(const OpSignature&) const = default;

  static constexpr size_t kWords = 6;
  // As int64 words, for backends that gather int64 tensors.
  std::vector<int64_t> words() const;
  static OpSignature from_words(const int64_t* w);
};

// One op as the front door describes it to a backend, built once per call: `name` and
// `detail` title it in timeouts, roll calls and errors ("all_reduce #3 (sum, float32, 4
// elements) in group 'world'"); point-to-point ops have no signature.
struct OpDescription {
  const char* name = "";  // "all_reduce", ..., "batch_send_recv", "split"
  std::string detail;     // "sum, float32, 12 elements"
  std::optional<OpSignature> signature;
};

// What a group's split hands its backend once the rank list is checked.
struct SplitPlan {
  std::span<const int> ranks;  // group ranks, ascending, including this rank's
  std::string name;            // the new group's: the caller's, or "split(ranks 0,2)"
  int my_index = -1;           // this rank's rank in the new group
  std::vector<int> globals;    // the members' world ranks
};

// A set of ranks that run collectives together. Every call is asynchronous: it checks its
// arguments on the calling thread (throwing strata::Error on bad input), enqueues the op and
// returns a Work. Ops run in issue order, and every rank of the group must issue the same
// ops in the same order. Tensors must be contiguous and stay alive and untouched until the
// Work completes.
//
// Sizes: all_reduce and broadcast take the same numel on every rank. For all_gather and
// reduce_scatter a "total" of M elements is split into N chunks, chunk r =
// [r*c, min((r+1)*c, M)) with c = ceil(M/N) (so the last chunks may be shorter or empty):
// all_gather(out [M], in [chunk r]) and reduce_scatter(out [chunk r], in [M]).
// all_to_all(out, in): in and out have N*k elements; block j of `in` goes to rank j, block i
// of `out` comes from rank i. `in` may be `out`'s own chunk (in-place all_gather); other
// overlaps are staged through a copy.
// all_to_all_v(out, in, out_splits, in_splits) (torch's all_to_all_single with split sizes):
// splits count rows along dim 0 (a row: the other dims), one entry per rank, zeros allowed;
// the first in_splits[0] rows of `in` go to rank 0, the next in_splits[1] to rank 1, ...;
// `out` receives out_splits[i] rows from rank i, in rank order. in and out have the same
// dtype and row shape, and their splits sum to their rows. Each rank's out_splits[i] must
// equal rank i's in_splits[this rank]; dist::exchange_split_sizes computes them.
//
// dtypes: float32, float64, bfloat16, float16, int32, int64. ReduceOp::Avg is a sum divided
// by N and needs a floating dtype (integer Avg is rejected rather than truncated).
//
// Devices: the MPI and local groups take CPU tensors, and CUDA tensors by staging them
// through host memory (the result reaches the CUDA tensor when the Work is waited on or
// reports completion). NCCL groups (dist::new_nccl_group) take CUDA tensors on their device.
//
// Faults: every op has the group's timeout, counted from its issue. An op that does not
// complete in time fails (Work::wait throws) with a message naming the op, its sequence
// number in the group, the group and the ranks that have not reached it; the group is
// unusable afterwards (later calls throw, saying why). Issue a group's ops from one thread.
//
// Shape: the public ops are the one front door of every backend (as c10d's user-facing
// group over its backends): each checks its arguments with one wording, stages CUDA
// tensors through the host for backends that move host memory, describes the op and counts
// it in stats(), then calls the backend's protected do_* with tensors it can take.
class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  int rank() const { return rank_; }
  int size() const { return size_; }
  // Human-readable: "world", "dp(ranks 0,2)", ... used in error messages.
  const std::string& name() const { return name_; }
  // The global (world) rank of each member, by group rank.
  const std::vector<int>& global_ranks() const { return global_ranks_; }
  // The device of the tensors this group's ops take natively: the CPU for MPI and local
  // groups (which also stage CUDA tensors), the group's GPU for NCCL. Code that exchanges
  // small values of its own (signatures, orders) makes them here.
  virtual Device tensor_device() const { return Device::cpu(); }

  WorkPtr all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::Sum);
  WorkPtr broadcast(Tensor& tensor, int root);
  WorkPtr all_gather(Tensor& out, const Tensor& in);
  WorkPtr reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op = ReduceOp::Sum);
  WorkPtr all_to_all(Tensor& out, const Tensor& in);
  WorkPtr all_to_all_v(Tensor& out, const Tensor& in, std::span<const int64_t> out_splits,
                       std::span<const int64_t> in_splits);
  WorkPtr send(const Tensor& tensor, int dst);
  WorkPtr recv(Tensor& tensor, int src);
  WorkPtr barrier();
  // Several sends and receives issued together; the one Work completes when all of them
  // have. Order inside a batch does not matter (no deadlock when two ranks both send first):
  // MPI progresses the ops together, NCCL fuses them into one group call. Each op is checked
  // and counted in stats() as a send or recv; an empty batch is complete at once.
  WorkPtr batch_send_recv(std::span<const P2POp> ops);

  // A new group of the listed ranks of this group (group ranks, ascending, including this
  // rank's); collective over this group: every member calls it with its own list, and the
  // lists must partition the group (checked on every rank before MPI is entered). An empty
  // name gives "split(ranks 0,2)". The new group inherits this group's timeout.
  std::unique_ptr<ProcessGroup> split(std::span<const int> ranks, const std::string& name);

  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // Per-op call and byte counts since construction or the last reset.
  CommStats stats() const;
  void reset_stats();

  // Chunk r of a total of `total` elements split over this group (see the class comment).
  int64_t chunk_begin(int64_t total, int r) const;
  int64_t chunk_size(int64_t total, int r) const;

 protected:
  ProcessGroup(int rank, int size, std::string name, std::vector<int> global_ranks)
      : rank_(rank), size_(size), name_(std::move(name)), global_ranks_(std::move(global_ranks)) {}

  // Which tensors a backend's do_* take; the front door stages or refuses the others.
  enum class Placement : uint8_t {
    Host,       // CPU tensors; CUDA tensors are staged through host copies (MPI)
    OwnDevice,  // tensors on tensor_device() only (NCCL)
    Any,        // tensors on any device (the local world of one, wrappers over a group)
  };
  virtual Placement placement() const { return Placement::Host; }

  // The backend's side of each op: the arguments are checked (same dtypes, sizes that fit
  // the group, ranks in range, contiguous tensors on a device placement() takes) and the
  // op is counted; it moves the data and returns the op's Work.
  virtual WorkPtr do_all_reduce(Tensor& tensor, ReduceOp op, const OpDescription& desc) = 0;
  virtual WorkPtr do_broadcast(Tensor& tensor, int root, const OpDescription& desc) = 0;
  virtual WorkPtr do_all_gather(Tensor& out, const Tensor& in, const OpDescription& desc) = 0;
  virtual WorkPtr do_reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op, const OpDescription& desc) = 0;
  virtual WorkPtr do_all_to_all(Tensor& out, const Tensor& in, const OpDescription& desc) = 0;
  // Splits in elements (rows times the row's elements), checked against the tensors. The
  // default sends and receives each rank's rows as one batch_send_recv (do_batch_send_recv).
  virtual WorkPtr do_all_to_all_v(Tensor& out, const Tensor& in, std::span<const int64_t> out_counts,
                                  std::span<const int64_t> in_counts, const OpDescription& desc);
  virtual WorkPtr do_send(const Tensor& tensor, int dst, const OpDescription& desc) = 0;
  virtual WorkPtr do_recv(Tensor& tensor, int src, const OpDescription& desc) = 0;
  virtual WorkPtr do_barrier(const OpDescription& desc) = 0;
  // A non-empty batch; the default issues the ops one by one through do_send/do_recv.
  virtual WorkPtr do_batch_send_recv(std::span<const P2POp> ops, const OpDescription& desc);
  // The rank list is checked (plan); the backend checks the partition collectively. The
  // front door gives the new group this group's timeout.
  virtual std::unique_ptr<ProcessGroup> do_split(const SplitPlan& plan, const OpDescription& desc) = 0;

  int rank_;
  int size_;
  std::string name_;
  std::vector<int> global_ranks_;
  std::chrono::milliseconds timeout_ = kDefaultTimeout;

 private:
  void count(OpType type, uint64_t bytes, uint64_t received_bytes = 0);
  void check_tensor(const char* op, const char* what, const Tensor& t) const;
  bool stages(const Tensor& a, const Tensor& b = {}) const;

  mutable std::mutex stats_mu_;
  CommStats stats_;
};

}  // namespace strata::dist
