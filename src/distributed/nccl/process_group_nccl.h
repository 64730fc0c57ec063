#pragma once
// ProcessGroup over NCCL for CUDA tensors (private: includes nccl.h).
//
// One communicator per group, bootstrapped over another (MPI) group that carries the unique
// id; split() by ncclCommSplit. Each group owns a comm stream (non-blocking). Every op:
//   1. records an event on the caller's current stream; the comm stream waits on it (so the
//      op sees everything queued before it), and records the comm stream on the op's
//      tensors (cuda::record_stream: the caching allocator holds their blocks back, once
//      freed, until the comm stream's work queued by then is done),
//   2. enqueues the NCCL call(s) on the comm stream,
//   3. records an end event on the comm stream.
// Work::wait() makes the caller's stream wait on the end event (the host does not block);
// Work::synchronize() blocks the host polling the event and ncclCommGetAsyncError. A
// watchdog thread per group polls every pending op: it releases the op's tensors once the
// end event completes (so freed blocks are never reused while NCCL still writes them; a
// failed op's tensors wait for its event too, or are never released), and when an op passes
// the group's timeout, NCCL reports an asynchronous error or CUDA an error on the op's
// event, it aborts the communicator, fails every pending op with a message naming the op,
// its sequence number, the group and the ranks that have not reached it, makes the group
// unusable and poisons the device (or aborts the process: STRATA_NCCL_FATAL=abort).
// Communicators are non-blocking (nccl_comm.h): creation, split, enqueue and teardown
// wait for NCCL against the group's timeout.
//
// NCCL reports no per-rank progress, so the ranks come from an arrival board
// (distributed/arrivals.h): every op announces "I entered op #seq" to the peers over an MPI
// communicator of the bootstrap group's; a group made over a non-MPI group has none, and
// its messages say the ranks are unknown.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "distributed/arrivals.h"
#include "distributed/group_checks.h"
#include "distributed/nccl/nccl_comm.h"
#include "strata/distributed/process_group.h"

namespace strata::dist::nccl {

struct GroupState;

// The completion state shared by a Work handle and the watchdog.
struct WorkState {
  std::string title;  // "all_reduce #3 (sum, float32, 4 elements) in group 'nccl(world)'"
  int64_t seq = -1;
  cudaEvent_t end = nullptr;  // recorded on the comm stream after the op
  std::chrono::milliseconds timeout{0};
  Clock::time_point deadline;
  // Guarded by GroupState::mu.
  bool done = false;
  std::string error;
  std::vector<Tensor> keep;  // the op's tensors and scratch buffers, alive until done

  WorkState() = default;
  WorkState(const WorkState&) = delete;
  WorkState& operator=(const WorkState&) = delete;
  // The end event lives as long as the op's state: Work::wait() and is_completed() still
  // query it after the watchdog has retired the op.
  ~WorkState() {
    if (end) (void)cudaEventDestroy(end);
  }
};

struct GroupState {
  std::string name;
  int rank = 0;
  int size = 1;
  int device = 0;
  ncclComm_t comm = nullptr;      // null once destroyed or aborted
  cudaStream_t stream = nullptr;  // the comm stream
  bool debug = false;             // STRATA_DEBUG_COLLECTIVES=1
  // Who reached which op (null: unknown); set at construction, used by any thread.
  std::unique_ptr<detail::ArrivalBoard> arrivals;

  // The device's enqueue lock (nccl_comm.h): held while NCCL calls are enqueued on comm
  // (caller thread) and while the communicator is aborted (watchdog), so the two never
  // overlap, nor two groups' enqueues on one device.
  std::timed_mutex* enqueue_mu = nullptr;
  int64_t next_seq = 0;  // under *enqueue_mu

  std::mutex mu;  // guards everything below and WorkState's guarded fields
  std::condition_variable cv;
  std::string broken;  // non-empty once unusable: the reason
  std::deque<std::shared_ptr<WorkState>> pending;
  // Failed ops whose end event had not completed: their tensors stay alive until it does
  // (queued kernels may still use them), and are never returned if it never does.
  std::vector<std::shared_ptr<WorkState>> quarantine;
  bool stop = false;
  std::thread watchdog;

  ~GroupState();
  // Fails every pending op and the group with `why`, aborting the communicator (watchdog
  // or a synchronize that saw an asynchronous error), then poisons the device or aborts
  // the process (nccl_comm.h's abort_on_fatal). Idempotent.
  void fail(const std::string& why);
  void watch();  // the watchdog loop
};

class ProcessGroupNCCL final : public ProcessGroup {
 public:
  // Takes ownership of `comm` (a communicator of `size` ranks on `device`) and of
  // `arrivals` (a board over the same ranks, or null).
  ProcessGroupNCCL(ncclComm_t comm, int rank, int size, int device, std::string name, std::vector<int> global_ranks,
                   std::unique_ptr<detail::ArrivalBoard> arrivals);
  ~ProcessGroupNCCL() override;

  int device() const { return state_->device; }
  Device tensor_device() const override { return Device::cuda(state_->device); }

 protected:
  Placement placement() const override { return Placement::OwnDevice; }
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
  WorkPtr do_batch_send_recv(std::span<const P2POp> ops, const OpDescription& desc) override;
  std::unique_ptr<ProcessGroup> do_split(const SplitPlan& plan, const OpDescription& desc) override;

 private:
  // Enqueues one op (see the header comment), after the debug signature check where the
  // op has one; `enqueue` makes the NCCL calls on the comm; `keep` lives until the op is done.
  template <class F>
  WorkPtr launch(const OpDescription& desc, std::vector<Tensor> keep, F&& enqueue);
  // Every rank's `mine` (same length on all), gathered over the communicator and waited
  // for on the host (split's partition check, debug signatures).
  std::vector<int64_t> host_all_gather(const std::vector<int64_t>& mine, const char* why);
  // STRATA_DEBUG_COLLECTIVES=1: every rank's signature of the op, gathered and compared.
  void check_signature(const OpDescription& desc);

  std::shared_ptr<GroupState> state_;
  Tensor barrier_scratch_;
};

// Creates a group over every rank of `bootstrap` (collective over it), on the calling
// thread's current CUDA device.
std::unique_ptr<ProcessGroup> make_group(ProcessGroup& bootstrap, const std::string& name);

}  // namespace strata::dist::nccl
