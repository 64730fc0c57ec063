#pragma once
// ProcessGroup over MPI for CPU tensors (the front door, process_group.h, checks the
// arguments on the calling thread and stages CUDA tensors through the host). The op itself
// runs on the engine (see engine.h: the worker, or the thread waiting for it) with
// non-blocking MPI.
//
// Large all_reduce / reduce_scatter / all_gather run as our own ring (ring.h).
//
// 16-bit floats (bfloat16, float16): reductions convert to float32, reduce in float32 (MPI's
// built-in ops or the ring's loop) and round back once (one rounding, independent of MPI's reduction
// tree, at the cost of twice the bytes on the wire); ops that only move data (broadcast,
// all_gather, all_to_all, send/recv) send the 2-byte values as they are.
#include <memory>

#include "distributed/mpi/engine.h"
#include "strata/distributed/process_group.h"

namespace strata::dist::mpi {

class ProcessGroupMPI final : public ProcessGroup {
 public:
  explicit ProcessGroupMPI(std::shared_ptr<GroupState> state);
  ~ProcessGroupMPI() override;

  // The engine-side state (arrival boards split their side channel from its communicator).
  const std::shared_ptr<GroupState>& state() const { return state_; }

 protected:
  WorkPtr do_all_reduce(Tensor& tensor, ReduceOp op, const OpDescription& desc) override;
  WorkPtr do_broadcast(Tensor& tensor, int root, const OpDescription& desc) override;
  WorkPtr do_all_gather(Tensor& out, const Tensor& in, const OpDescription& desc) override;
  WorkPtr do_reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op, const OpDescription& desc) override;
  WorkPtr do_all_to_all(Tensor& out, const Tensor& in, const OpDescription& desc) override;
  WorkPtr do_all_to_all_v(Tensor& out, const Tensor& in, std::span<const int64_t> out_counts,
                          std::span<const int64_t> in_counts, const OpDescription& desc) override;
  WorkPtr do_send(const Tensor& tensor, int dst, const OpDescription& desc) override;
  WorkPtr do_recv(Tensor& tensor, int src, const OpDescription& desc) override;
  WorkPtr do_barrier(const OpDescription& desc) override;
  std::unique_ptr<ProcessGroup> do_split(const SplitPlan& plan, const OpDescription& desc) override;

 private:
  Engine& engine(const char* op) const;  // throws after finalize or on a broken group
  std::unique_ptr<Op> make_op(const OpDescription& desc);
  // Adds the debug signature check (STRATA_DEBUG_COLLECTIVES=1) and hands the op to the engine.
  WorkPtr submit(std::unique_ptr<Op> op, const OpDescription& desc);
  std::shared_ptr<GroupState> state_;
};

}  // namespace strata::dist::mpi
