#include "distributed/nccl/process_group_nccl.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_check.h"
#include "distributed/env_settings.h"
#include "distributed/group_checks.h"
#include "strata/core/error.h"
#include "strata/tensor/cuda.h"
#include "strata/tensor/factory.h"

namespace strata::dist::nccl {
namespace {

using detail::overlap;

ncclDataType_t nccl_type(DType d) {
  switch (d) {
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::BFloat16: return ncclBfloat16;
    case DType::Float16: return ncclFloat16;
    case DType::Int32: return ncclInt32;
    case DType::Int64: return ncclInt64;
    case DType::Bool: return ncclUint8;  // moved, never reduced (check_average_dtype)
  }
  STRATA_FAIL("nccl: unknown dtype ", static_cast<int>(d));
}

// ncclGroupStart/End as a scope: an error between them (a throwing ncclSend) still ends the
// group, so this thread's later NCCL calls are not swallowed into a group that never ends.
class NcclGroupScope {
 public:
  NcclGroupScope() { STRATA_NCCL(ncclGroupStart()); }
  ~NcclGroupScope() {
    if (open_) (void)ncclGroupEnd();
  }
  NcclGroupScope(const NcclGroupScope&) = delete;
  NcclGroupScope& operator=(const NcclGroupScope&) = delete;
  // Ends the group, reporting NCCL's error (the launch of everything in it).
  void end() {
    open_ = false;
    STRATA_NCCL(ncclGroupEnd());
  }

 private:
  bool open_ = true;
};

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
    case ReduceOp::Product: return ncclProd;
  }
  STRATA_FAIL("nccl: unknown reduce op ", static_cast<int>(op));
}

char* bytes_at(const Tensor& t, int64_t elements) {
  return static_cast<char*>(t.data_ptr()) + elements * static_cast<int64_t>(dtype_size(t.dtype()));
}

// ------------------------------------------------------------------ Work

class WorkNCCL final : public Work {
 public:
  WorkNCCL(std::shared_ptr<WorkState> w, std::shared_ptr<GroupState> g) : w_(std::move(w)), g_(std::move(g)) {}

  bool is_completed() override {
    {
      std::lock_guard<std::mutex> lk(g_->mu);
      if (w_->done || !w_->error.empty()) return true;
    }
    cuda_detail::DeviceGuard guard(g_->device);
    return cudaEventQuery(w_->end) == cudaSuccess;
  }

  // Stream-ordered: later work on the caller's current stream runs after the op.
  void wait() override {
    rethrow();
    cuda_detail::DeviceGuard guard(g_->device);
    STRATA_CUDA(cudaStreamWaitEvent(cuda_detail::stream_of(g_->device), w_->end, 0));
  }

  void synchronize() override { block(Clock::time_point::max(), std::chrono::milliseconds(0)); }
  void synchronize(std::chrono::milliseconds timeout) override { block(Clock::now() + timeout, timeout); }

 private:
  void rethrow() {
    std::lock_guard<std::mutex> lk(g_->mu);
    if (w_->error.empty()) return;
    int rank = error_rank();
    throw Error(rank >= 0 ? "[rank " + std::to_string(rank) + "] " + w_->error : w_->error);
  }

  // Host-blocking wait. Without a deadline the group's watchdog still ends it (the op's
  // own timeout fails it).
  void block(Clock::time_point until, std::chrono::milliseconds timeout) {
    cuda_detail::DeviceGuard guard(g_->device);
    for (auto pause = std::chrono::microseconds(20);; pause = std::min(pause * 2, std::chrono::microseconds(2000))) {
      rethrow();
      cudaError_t q = cudaEventQuery(w_->end);
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) {
        (void)cudaGetLastError();
        g_->fail(w_->title + ": the CUDA event failed: " + cudaGetErrorString(q));
        rethrow();
      }
      ncclResult_t async = ncclSuccess;
      {
        std::lock_guard<std::mutex> lk(g_->mu);
        if (g_->comm != nullptr) (void)ncclCommGetAsyncError(g_->comm, &async);
      }
      if (async != ncclSuccess && async != ncclInProgress) {
        g_->fail(std::string("NCCL reported an asynchronous error (") + ncclGetErrorString(async) +
                 "); the communicator was aborted and group '" + g_->name + "' is unusable");
        rethrow();
      }
      if (Clock::now() >= until) {
        STRATA_FAIL(w_->title, ": not completed within ", timeout.count(), " ms (synchronize); ",
                    detail::describe_arrivals(g_->arrivals.get(), w_->seq), ". The op is still pending.");
      }
      std::this_thread::sleep_for(pause);
    }
  }

  std::shared_ptr<WorkState> w_;
  std::shared_ptr<GroupState> g_;
};

}  // namespace

// ------------------------------------------------------------------ GroupState

GroupState::~GroupState() = default;  // each op's end event goes with its WorkState

void GroupState::fail(const std::string& why) {
  {
    std::lock_guard<std::mutex> lk(mu);
    if (!broken.empty()) return;
    broken = why;
    for (auto& w : pending)
      if (w->error.empty()) w->error = w->title + ": " + why;
  }
  // Abort outside mu (it may take a while); waiting for the enqueue lock keeps the abort
  // from racing a caller's NCCL call, except a call stuck for over a second, which abort is
  // then meant to release.
  std::unique_lock<std::timed_mutex> elk(*enqueue_mu, std::defer_lock);
  (void)elk.try_lock_for(std::chrono::seconds(1));
  ncclComm_t c = nullptr;
  {
    std::lock_guard<std::mutex> lk(mu);
    c = comm;
    comm = nullptr;
  }
  if (c != nullptr) (void)ncclCommAbort(c);
  cv.notify_all();
  // The failed ops' outputs hold partial results that nothing else marks: refuse the device
  // from now on, or end the process.
  const std::string reason = "NCCL group '" + name + "' failed: " + why;
  if (abort_on_fatal()) {
    std::fprintf(stderr, "[rank %d] strata: %s; aborting (STRATA_NCCL_FATAL=abort)\n", rank, reason.c_str());
    std::fflush(stderr);
    std::abort();
  }
  cuda_detail::poison_device(device, reason);
}

void GroupState::watch() {
  (void)cudaSetDevice(device);
  std::unique_lock<std::mutex> lk(mu);
  while (true) {
    if (pending.empty() && quarantine.empty()) {
      cv.wait(lk, [&] { return stop || !pending.empty(); });  // idle: no polling
    } else {
      cv.wait_for(lk, std::chrono::milliseconds(2));
    }
    if (stop && pending.empty()) break;
    // Quarantined tensors go back once their op's kernels are done.
    std::erase_if(quarantine, [](const std::shared_ptr<WorkState>& w) {
      if (cudaEventQuery(w->end) != cudaSuccess) return false;
      w->keep.clear();
      return true;
    });
    // Completed ops, oldest first (the comm stream finishes them in issue order).
    std::string cuda_error;
    while (!pending.empty()) {
      std::shared_ptr<WorkState> w = pending.front();
      const cudaError_t q = cudaEventQuery(w->end);
      if (q != cudaSuccess && q != cudaErrorNotReady) {
        (void)cudaGetLastError();
        if (w->error.empty()) {
          // A CUDA error on the op's event: its kernels' state is unknown.
          cuda_error = "op #" + std::to_string(w->seq) + ": CUDA reported " + cudaGetErrorName(q) + " (" +
                       cudaGetErrorString(q) + ") on its completion event";
          break;
        }
      }
      if (q == cudaErrorNotReady && w->error.empty()) break;
      w->done = true;
      if (q == cudaSuccess) {
        w->keep.clear();  // the stream is done with them
      } else {
        quarantine.push_back(w);  // failed while queued kernels may still use its tensors
      }
      pending.pop_front();
    }
    if ((pending.empty() && cuda_error.empty()) || !broken.empty()) continue;
    ncclResult_t async = ncclSuccess;
    if (comm != nullptr) (void)ncclCommGetAsyncError(comm, &async);
    std::string why = cuda_error;
    if (why.empty() && async != ncclSuccess && async != ncclInProgress) {
      why = std::string("NCCL reported an asynchronous error (") + ncclGetErrorString(async) + ")";
    } else if (why.empty() && Clock::now() >= pending.front()->deadline) {
      std::shared_ptr<WorkState> w = pending.front();
      // Ask the side channel who has not reached it (up to kArrivalBudget), outside mu.
      lk.unlock();
      std::string who = detail::describe_arrivals(arrivals.get(), w->seq);
      lk.lock();
      if (!broken.empty() || cudaEventQuery(w->end) == cudaSuccess) continue;  // settled meanwhile
      why = "op #" + std::to_string(w->seq) + " timed out after the group's timeout of " +
            std::to_string(w->timeout.count()) + " ms (watchdog); " + who;
    }
    if (!why.empty()) {
      why += "; the communicator was aborted and group '" + name + "' is unusable";
      lk.unlock();
      fail(why);
      lk.lock();
    }
  }
  // Tensors of failed ops whose kernels never finished are deliberately never freed: the
  // caching allocator would hand their memory to new tensors while a kernel may still
  // write it. A leak is the safe outcome of a hung device.
  for (auto& w : quarantine) new std::vector<Tensor>(std::move(w->keep));
  quarantine.clear();
}

// ------------------------------------------------------------------ ProcessGroupNCCL

ProcessGroupNCCL::ProcessGroupNCCL(ncclComm_t comm, int rank, int size, int device, std::string name,
                                   std::vector<int> global_ranks, std::unique_ptr<detail::ArrivalBoard> arrivals)
    : ProcessGroup(rank, size, name, std::move(global_ranks)), state_(std::make_shared<GroupState>()) {
  state_->arrivals = std::move(arrivals);
  state_->name = std::move(name);
  state_->rank = rank;
  state_->size = size;
  state_->device = device;
  state_->comm = comm;
  state_->debug = detail::debug_collectives_from_env();
  state_->enqueue_mu = &device_enqueue_mutex(device);
  cuda_detail::DeviceGuard guard(device);
  STRATA_CUDA(cudaStreamCreateWithFlags(&state_->stream, cudaStreamNonBlocking));
  barrier_scratch_ = zeros({1}, {.dtype = DType::Int32, .device = Device::cuda(device)});
  state_->watchdog = std::thread([s = state_.get()] { s->watch(); });
}

ProcessGroupNCCL::~ProcessGroupNCCL() {
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    state_->stop = true;  // the watchdog drains pending ops (or times them out), then exits
  }
  state_->cv.notify_all();
  state_->watchdog.join();
  // Taken under mu: a Work's synchronize on another thread may still query the comm.
  ncclComm_t comm = nullptr;
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    std::swap(comm, state_->comm);
  }
  cuda_detail::DeviceGuard guard(state_->device);
  if (comm != nullptr) {
    // Finalize flushes the communicator's work; one that cannot (a peer gone) is aborted.
    std::lock_guard<std::timed_mutex> elk(*state_->enqueue_mu);
    bool finalized = false;
    try {
      STRATA_NCCL(ncclCommFinalize(comm));
      await_comm(comm, Clock::now() + timeout_, "destroying NCCL group '" + name_ + "'");
      finalized = true;
    } catch (const std::exception&) {
    }
    if (finalized) {
      (void)ncclCommDestroy(comm);
    } else {
      (void)ncclCommAbort(comm);
    }
  }
  if (state_->stream != nullptr) {
    // Blocks still in use that the stream used (barrier_scratch_, the callers' tensors) wait
    // for an event recorded now instead of naming the destroyed stream when freed.
    cuda_detail::retire_stream(state_->device, state_->stream);
    (void)cudaStreamDestroy(state_->stream);
  }
  state_->stream = nullptr;
}

template <class F>
WorkPtr ProcessGroupNCCL::launch(const OpDescription& desc, std::vector<Tensor> keep, F&& enqueue) {
  check_signature(desc);
  GroupState& g = *state_;
  std::string enqueue_error;
  {
    std::lock_guard<std::timed_mutex> elk(*g.enqueue_mu);
    {
      std::lock_guard<std::mutex> lk(g.mu);
      STRATA_CHECK(g.broken.empty() && g.comm != nullptr, desc.name, " on group '", name_,
                   "': the group is unusable after an earlier failure: ", g.broken);
    }
    cuda_detail::DeviceGuard guard(g.device);
    // The sequence number every rank shares is taken only once the op is on the stream: a
    // launch that fails here leaves the numbering as it was.
    const uint64_t seq = g.next_seq;
    const std::string title = std::string(desc.name) + " #" + std::to_string(seq) +
                              (desc.detail.empty() ? "" : " (" + desc.detail + ")") + " in group '" + name_ + "'";
    try {
      cudaEvent_t start = nullptr;
      STRATA_CUDA(cudaEventCreateWithFlags(&start, cudaEventDisableTiming));
      cudaError_t rc = cudaEventRecord(start, cuda_detail::stream_of(g.device));
      if (rc == cudaSuccess) rc = cudaStreamWaitEvent(g.stream, start, 0);
      (void)cudaEventDestroy(start);  // released once the wait is done with it
      STRATA_CUDA(rc);
      // The allocator learns that the comm stream uses these blocks: once freed, each is
      // reused only after the comm stream's work queued by then is done. The keep-alive
      // list (w->keep below) still holds the tensors until the end event completes, and
      // quarantines a failed op's: it also covers memory strata's allocator does not own
      // (Storage::wrap). The record covers what the list cannot: an enqueue that fails
      // half way makes no list, and its tensors are freed while kernels may be queued.
      for (const Tensor& t : keep) cuda::record_stream(t, g.stream);
      enqueue(g.comm, g.stream);
      // Non-blocking: the calls may still be enqueuing; the end event must follow them.
      await_comm(g.comm, Clock::now() + timeout_, "enqueuing " + title);
    } catch (const std::exception& e) {
      enqueue_error = title + " could not be launched: " + e.what();
    }
    if (enqueue_error.empty()) {
      auto w = std::make_shared<WorkState>();
      w->seq = seq;
      w->title = title;
      g.next_seq = seq + 1;
      // Tell the peers (one small MPI message each) so that a timeout can name who is late.
      if (g.arrivals) g.arrivals->entered(w->seq);
      STRATA_CUDA(cudaEventCreateWithFlags(&w->end, cudaEventDisableTiming));
      STRATA_CUDA(cudaEventRecord(w->end, g.stream));
      w->timeout = timeout_;
      w->deadline = Clock::now() + timeout_;
      w->keep = std::move(keep);
      {
        std::lock_guard<std::mutex> lk(g.mu);
        g.pending.push_back(w);
      }
      g.cv.notify_all();
      return std::make_unique<WorkNCCL>(std::move(w), state_);
    }
  }
  // The peers may be inside the op this rank could not launch: the group cannot be used
  // again (a later op would be matched against theirs). Broken outside enqueue_mu, which
  // fail() takes to abort the communicator.
  g.fail(enqueue_error);
  STRATA_FAIL(enqueue_error);
}

std::vector<int64_t> ProcessGroupNCCL::host_all_gather(const std::vector<int64_t>& mine, const char* why) {
  const int64_t k = static_cast<int64_t>(mine.size());
  Tensor in = from_vector(mine, {k}).to(Device::cuda(state_->device));
  Tensor out = empty({k * size_}, {.dtype = DType::Int64, .device = Device::cuda(state_->device)});
  WorkPtr w = launch({why, "", std::nullopt}, {in, out}, [&](ncclComm_t comm, cudaStream_t s) {
    STRATA_NCCL(ncclAllGather(in.data_ptr(), out.data_ptr(), static_cast<size_t>(k), ncclInt64, comm, s));
  });
  w->synchronize(timeout_);
  return out.to_vector<int64_t>();  // a copy on the current stream, ordered by the wait
}

void ProcessGroupNCCL::check_signature(const OpDescription& desc) {
  if (!state_->debug || !desc.signature) return;
  detail::Signature mine = *desc.signature;
  {
    std::lock_guard<std::timed_mutex> elk(*state_->enqueue_mu);
    mine.seq = state_->next_seq;
  }
  std::vector<int64_t> words = host_all_gather(mine.words(), "debug signature check");
  std::vector<detail::Signature> all;
  all.reserve(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r)
    all.push_back(detail::Signature::from_words(words.data() + static_cast<size_t>(r) * detail::Signature::kWords));
  std::string mismatch = detail::signature_mismatch(all, name_);
  if (!mismatch.empty()) STRATA_FAIL(mismatch);
}

// ------------------------------------------------------------------ collectives

WorkPtr ProcessGroupNCCL::do_all_reduce(Tensor& tensor, ReduceOp rop, const OpDescription& desc) {
  const DType d = tensor.dtype();
  const int64_t n = tensor.numel();
  return launch(desc, {tensor}, [&](ncclComm_t comm, cudaStream_t s) {
    if (n == 0) return;
    STRATA_NCCL(ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(), static_cast<size_t>(n), nccl_type(d), nccl_op(rop),
                              comm, s));
  });
}

WorkPtr ProcessGroupNCCL::do_broadcast(Tensor& tensor, int root, const OpDescription& desc) {
  const DType d = tensor.dtype();
  const int64_t n = tensor.numel();
  return launch(desc, {tensor}, [&](ncclComm_t comm, cudaStream_t s) {
    if (n == 0) return;
    STRATA_NCCL(
        ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(), static_cast<size_t>(n), nccl_type(d), root, comm, s));
  });
}

// Uneven chunks (M not divisible by N) go through a padded buffer of N*c elements, whose
// first M elements are exactly `out`: NCCL's all_gather needs equal counts.
WorkPtr ProcessGroupNCCL::do_all_gather(Tensor& out, const Tensor& in, const OpDescription& desc) {
  const int64_t m = out.numel();
  const int64_t mine = chunk_size(m, rank_);
  const DType d = out.dtype();
  const int64_t c = (m + size_ - 1) / size_;
  const bool even = c * size_ == m;
  Tensor buf = even ? out : empty({c * size_}, {.dtype = d, .device = out.device()});
  return launch(desc, {out, in, buf}, [&](ncclComm_t comm, cudaStream_t s) {
    if (m == 0) return;
    char* slot = bytes_at(buf, static_cast<int64_t>(rank_) * c);
    if (mine > 0 && slot != in.data_ptr())  // not already in place
      STRATA_CUDA(cudaMemcpyAsync(slot, in.data_ptr(), in.nbytes(), cudaMemcpyDeviceToDevice, s));
    STRATA_NCCL(ncclAllGather(slot, buf.data_ptr(), static_cast<size_t>(c), nccl_type(d), comm, s));
    if (!even) STRATA_CUDA(cudaMemcpyAsync(out.data_ptr(), buf.data_ptr(), out.nbytes(), cudaMemcpyDeviceToDevice, s));
  });
}

WorkPtr ProcessGroupNCCL::do_reduce_scatter(Tensor& out, const Tensor& in, ReduceOp rop, const OpDescription& desc) {
  const DType d = in.dtype();
  const int64_t m = in.numel();
  const int64_t mine = chunk_size(m, rank_);
  const int64_t c = (m + size_ - 1) / size_;
  const bool even = c * size_ == m;
  // Uneven: the input padded to N*c (the padding only reaches the discarded tail of the
  // last chunk) and a full-size output chunk.
  Tensor src = in, dst = out;
  if (!even) {
    src = zeros({c * size_}, {.dtype = d, .device = in.device()});
    src.narrow(0, 0, m).copy_(in.view({m}));
    dst = empty({c}, {.dtype = d, .device = out.device()});
  } else if (overlap(out, in)) {
    src = in.clone();
  }
  return launch(desc, {out, in, src, dst}, [&](ncclComm_t comm, cudaStream_t s) {
    if (c == 0) return;
    STRATA_NCCL(
        ncclReduceScatter(src.data_ptr(), dst.data_ptr(), static_cast<size_t>(c), nccl_type(d), nccl_op(rop), comm, s));
    if (!even && mine > 0)
      STRATA_CUDA(cudaMemcpyAsync(out.data_ptr(), dst.data_ptr(), out.nbytes(), cudaMemcpyDeviceToDevice, s));
  });
}

WorkPtr ProcessGroupNCCL::do_all_to_all(Tensor& out, const Tensor& in, const OpDescription& desc) {
  const DType d = in.dtype();
  const int64_t k = in.numel() / size_;
  Tensor src = overlap(out, in) ? in.clone() : in;
  return launch(desc, {out, in, src}, [&](ncclComm_t comm, cudaStream_t s) {
    if (k == 0) return;
    NcclGroupScope group;
    for (int r = 0; r < size_; ++r) {
      STRATA_NCCL(ncclSend(bytes_at(src, r * k), static_cast<size_t>(k), nccl_type(d), r, comm, s));
      STRATA_NCCL(ncclRecv(bytes_at(out, r * k), static_cast<size_t>(k), nccl_type(d), r, comm, s));
    }
    group.end();
  });
}

// One NCCL group of a send and a receive per peer (empty ones left out, on both sides
// alike since the splits match): NCCL has no all-to-all-v of its own.
WorkPtr ProcessGroupNCCL::do_all_to_all_v(Tensor& out, const Tensor& in, std::span<const int64_t> out_counts,
                                          std::span<const int64_t> in_counts, const OpDescription& desc) {
  const ncclDataType_t t = nccl_type(in.dtype());
  Tensor src = overlap(out, in) ? in.clone() : in;
  return launch(desc, {out, in, src}, [&](ncclComm_t comm, cudaStream_t s) {
    NcclGroupScope group;
    int64_t sent = 0, received = 0;
    for (int r = 0; r < size_; ++r) {
      const auto i = static_cast<size_t>(r);
      if (in_counts[i] > 0)
        STRATA_NCCL(ncclSend(bytes_at(src, sent), static_cast<size_t>(in_counts[i]), t, r, comm, s));
      if (out_counts[i] > 0)
        STRATA_NCCL(ncclRecv(bytes_at(out, received), static_cast<size_t>(out_counts[i]), t, r, comm, s));
      sent += in_counts[i];
      received += out_counts[i];
    }
    group.end();
  });
}

WorkPtr ProcessGroupNCCL::do_barrier(const OpDescription& desc) {
  Tensor t = barrier_scratch_;
  return launch(desc, {t}, [&](ncclComm_t comm, cudaStream_t s) {
    STRATA_NCCL(ncclAllReduce(t.data_ptr(), t.data_ptr(), 1, ncclInt32, ncclSum, comm, s));
  });
}

// ------------------------------------------------------------------ point to point

WorkPtr ProcessGroupNCCL::do_send(const Tensor& tensor, int dst, const OpDescription& desc) {
  const P2POp op = P2POp::send(tensor, dst);
  return do_batch_send_recv({&op, 1}, desc);
}

WorkPtr ProcessGroupNCCL::do_recv(Tensor& tensor, int src, const OpDescription& desc) {
  const P2POp op = P2POp::recv(tensor, src);
  return do_batch_send_recv({&op, 1}, desc);
}

// One NCCL group call; NCCL cannot report a received size, so a recv whose peer sends a
// different size is undefined (as in NCCL itself): match the sizes.
WorkPtr ProcessGroupNCCL::do_batch_send_recv(std::span<const P2POp> ops, const OpDescription& desc) {
  std::vector<Tensor> keep;
  for (const P2POp& op : ops) keep.push_back(op.tensor);
  return launch(desc, std::move(keep), [&](ncclComm_t comm, cudaStream_t s) {
    NcclGroupScope group;
    for (const P2POp& op : ops) {
      const size_t n = static_cast<size_t>(op.tensor.numel());
      if (n == 0) continue;
      if (op.kind == P2POp::Kind::Send) {
        STRATA_NCCL(ncclSend(op.tensor.data_ptr(), n, nccl_type(op.tensor.dtype()), op.peer, comm, s));
      } else {
        STRATA_NCCL(ncclRecv(op.tensor.data_ptr(), n, nccl_type(op.tensor.dtype()), op.peer, comm, s));
      }
    }
    group.end();
  });
}

// ------------------------------------------------------------------ split

std::unique_ptr<ProcessGroup> ProcessGroupNCCL::do_split(const SplitPlan& plan, const OpDescription& desc) {
  check_signature(desc);
  // Every rank validates the whole partition from the same gathered data before any of
  // them enters the blocking ncclCommSplit.
  const detail::SplitEntry mine = detail::split_entry(plan.ranks);
  std::vector<int64_t> words = host_all_gather({mine.lowest, mine.count, static_cast<int64_t>(mine.hash)}, "split");
  std::vector<detail::SplitEntry> all;
  for (size_t r = 0; r < static_cast<size_t>(size_); ++r)
    all.push_back({words[3 * r], words[3 * r + 1], static_cast<uint64_t>(words[3 * r + 2])});
  detail::check_partition(name_, all);
  // The child's arrival board: the same partition of the parent's board (collective over it).
  std::unique_ptr<detail::ArrivalBoard> child_board =
      state_->arrivals ? state_->arrivals->split(plan.ranks, plan.name) : nullptr;
  ncclComm_t child = nullptr;
  {
    std::lock_guard<std::timed_mutex> elk(*state_->enqueue_mu);
    {
      std::lock_guard<std::mutex> lk(state_->mu);
      STRATA_CHECK(state_->broken.empty() && state_->comm != nullptr, "split on group '", name_,
                   "': the group is unusable after an earlier failure: ", state_->broken);
    }
    cuda_detail::DeviceGuard guard(state_->device);
    ncclConfig_t config = nonblocking_config();
    const std::string what = "split of group '" + name_ + "' into '" + plan.name + "'";
    try {
      STRATA_NCCL(ncclCommSplit(state_->comm, plan.ranks[0], rank_, &child, &config));
      await_comm(state_->comm, Clock::now() + timeout_, what);
      if (child != nullptr) await_comm(child, Clock::now() + timeout_, what);
    } catch (const std::exception& e) {
      if (child != nullptr) (void)ncclCommAbort(child);
      STRATA_FAIL(e.what(), " (the peers of ", what, " may not all have called split)");
    }
  }
  return std::make_unique<ProcessGroupNCCL>(child, plan.my_index, static_cast<int>(plan.ranks.size()), state_->device,
                                            plan.name, plan.globals, std::move(child_board));
}

}  // namespace strata::dist::nccl
