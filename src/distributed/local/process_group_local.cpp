// A world of one process without MPI (builds with STRATA_WITH_MPI=OFF, or when a singleton
// MPI start fails without a launcher). Every op completes on the calling thread: all_reduce
// and broadcast leave the tensor as it is, all_gather/reduce_scatter/all_to_all copy, and
// send/recv (which would need a peer) are rejected. CUDA tensors are accepted (copies run on
// the device).
#include <cstring>
#include <mutex>

#include "distributed/backend.h"
#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/distributed/init.h"

namespace strata::dist::detail {
namespace {

class DoneWork final : public Work {
 public:
  bool is_completed() override { return true; }
  void wait() override {}
  void synchronize(std::chrono::milliseconds) override {}
  void synchronize() override {}
};

class ProcessGroupLocal final : public ProcessGroup {
 public:
  explicit ProcessGroupLocal(std::string name) : ProcessGroup(0, 1, std::move(name), {0}) {}

  WorkPtr all_reduce(Tensor& t, ReduceOp op) override {
    check(t, "all_reduce");
    STRATA_CHECK(op != ReduceOp::Avg || is_floating(t.dtype()), "all_reduce: ReduceOp::Avg needs a floating dtype, got ",
                 t.dtype());
    return count(OpType::AllReduce, t.nbytes());
  }
  WorkPtr broadcast(Tensor& t, int root) override {
    check(t, "broadcast");
    STRATA_CHECK(root == 0, "broadcast: root ", root, " is out of range for group '", name_, "' of size 1");
    return count(OpType::Broadcast, t.nbytes());
  }
  WorkPtr all_gather(Tensor& out, const Tensor& in) override { return copy(out, in, "all_gather", OpType::AllGather); }
  WorkPtr reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op) override {
    STRATA_CHECK(op != ReduceOp::Avg || is_floating(in.dtype()),
                 "reduce_scatter: ReduceOp::Avg needs a floating dtype, got ", in.dtype());
    return copy(out, in, "reduce_scatter", OpType::ReduceScatter);
  }
  WorkPtr all_to_all(Tensor& out, const Tensor& in) override { return copy(out, in, "all_to_all", OpType::AllToAll); }
  WorkPtr send(const Tensor&, int dst) override {
    STRATA_FAIL("send: rank ", dst, " in a world of one process without MPI (nothing would receive it)");
  }
  WorkPtr recv(Tensor&, int src) override {
    STRATA_FAIL("recv: rank ", src, " in a world of one process without MPI (nothing would send it)");
  }
  WorkPtr barrier() override {
    alive("barrier");
    return count(OpType::Barrier, 0);
  }
  std::unique_ptr<ProcessGroup> split(std::span<const int> ranks, const std::string& name) override {
    alive("split");
    STRATA_CHECK(ranks.size() == 1 && ranks[0] == 0, "split of group '", name_, "': only {0} exists in a world of one");
    auto g = std::make_unique<ProcessGroupLocal>(name.empty() ? "split(ranks 0)" : name);
    g->set_timeout(timeout_);
    return g;
  }
  CommStats stats() const override {
    std::lock_guard<std::mutex> lk(mu_);
    return stats_;
  }
  void reset_stats() override {
    std::lock_guard<std::mutex> lk(mu_);
    stats_.clear();
  }

 private:
  void alive(const char* op) const {
    STRATA_CHECK(is_initialized(), op, " on group '", name_, "': the distributed runtime is not running "
                                   "(dist::finalize was called or init was not)");
  }
  void check(const Tensor& t, const char* op) const {
    alive(op);
    STRATA_CHECK(t.defined() && t.is_contiguous(), op, ": the tensor must be a defined, contiguous tensor");
  }
  WorkPtr count(OpType type, uint64_t bytes) {
    std::lock_guard<std::mutex> lk(mu_);
    stats_[type].calls += 1;
    stats_[type].bytes += bytes;
    return std::make_unique<DoneWork>();
  }
  WorkPtr copy(Tensor& out, const Tensor& in, const char* op, OpType type) {
    check(out, op);
    check(in, op);
    STRATA_CHECK(out.dtype() == in.dtype() && out.numel() == in.numel(), op, ": out (", out.dtype(), ", ",
                 out.numel(), " elements) and in (", in.dtype(), ", ", in.numel(), " elements) must match in a "
                 "world of one");
    if (out.numel() == 0 || out.data_ptr() == in.data_ptr()) return count(type, in.nbytes());
    if (out.device().is_cpu() && in.device().is_cpu()) {
      std::memmove(out.raw_data(), in.raw_data(), in.nbytes());
    } else {  // CUDA tensors (or mixed): a device copy
      NoGradGuard no_grad;
      out.view({out.numel()}).copy_(in.view({in.numel()}));
    }
    return count(type, in.nbytes());
  }
  mutable std::mutex mu_;
  CommStats stats_;
};

}  // namespace

std::unique_ptr<ProcessGroup> make_local_world() { return std::make_unique<ProcessGroupLocal>("world"); }

}  // namespace strata::dist::detail
