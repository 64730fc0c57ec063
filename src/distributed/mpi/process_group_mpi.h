#pragma once
// ProcessGroup over MPI for CPU tensors. Arguments are checked on the calling thread; the
// op itself runs on the engine (see engine.h: the worker, or the thread waiting for it)
// with non-blocking MPI.
//
// Large all_reduce / reduce_scatter / all_gather run as our own ring (ring.h).
//
// 16-bit floats (bfloat16, float16): reductions convert to float32, reduce in float32 (MPI's
// built-in ops or the ring's loop) and round back once (one rounding, independent of MPI's reduction
// tree, at the cost of twice the bytes on the wire); ops that only move data (broadcast,
// all_gather, all_to_all, send/recv) send the 2-byte values as they are.
#include <memory>
#include <optional>

#include "distributed/mpi/engine.h"
#include "strata/distributed/process_group.h"

namespace strata::dist::mpi {

class ProcessGroupMPI final : public ProcessGroup {
 public:
  explicit ProcessGroupMPI(std::shared_ptr<GroupState> state);
  ~ProcessGroupMPI() override;

  WorkPtr all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::Sum) override;
  WorkPtr broadcast(Tensor& tensor, int root) override;
  WorkPtr all_gather(Tensor& out, const Tensor& in) override;
  WorkPtr reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op = ReduceOp::Sum) override;
  WorkPtr all_to_all(Tensor& out, const Tensor& in) override;
  WorkPtr send(const Tensor& tensor, int dst) override;
  WorkPtr recv(Tensor& tensor, int src) override;
  WorkPtr barrier() override;
  std::unique_ptr<ProcessGroup> split(std::span<const int> ranks, const std::string& name) override;

  CommStats stats() const override;
  void reset_stats() override;
  // The engine-side state (arrival boards split their side channel from its communicator).
  const std::shared_ptr<GroupState>& state() const { return state_; }

 private:
  Engine& engine(const char* op) const;  // throws after finalize or on a broken group
  std::unique_ptr<Op> make_op(const char* kind, std::string detail);
  WorkPtr submit(std::unique_ptr<Op> op, std::optional<OpType> type, uint64_t bytes);  // nullopt: not counted
  std::shared_ptr<GroupState> state_;
};

}  // namespace strata::dist::mpi
