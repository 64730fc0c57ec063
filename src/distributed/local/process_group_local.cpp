// A world of one process without MPI (builds with STRATA_WITH_MPI=OFF, or when a singleton
// MPI start fails without a launcher). The front door (process_group.h) checks and counts;
// every op completes on the calling thread: all_reduce and broadcast leave the tensor as it
// is, all_gather/reduce_scatter/all_to_all(_v) copy, and send/recv (which would need a peer) are
// rejected. CUDA tensors are taken as they are (copies run on the device).
#include <cstring>

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

 protected:
  // CUDA tensors need no staging: the copies run on their device.
  Placement placement() const override { return Placement::Any; }
  WorkPtr do_all_reduce(Tensor&, ReduceOp, const OpDescription& desc) override { return done(desc); }
  WorkPtr do_broadcast(Tensor&, int, const OpDescription& desc) override { return done(desc); }
  WorkPtr do_all_gather(Tensor& out, const Tensor& in, const OpDescription& desc) override {
    return copy(out, in, desc);
  }
  WorkPtr do_reduce_scatter(Tensor& out, const Tensor& in, ReduceOp, const OpDescription& desc) override {
    return copy(out, in, desc);
  }
  WorkPtr do_all_to_all(Tensor& out, const Tensor& in, const OpDescription& desc) override {
    return copy(out, in, desc);
  }
  // One rank: its only split sends every row to itself.
  WorkPtr do_all_to_all_v(Tensor& out, const Tensor& in, std::span<const int64_t>, std::span<const int64_t>,
                          const OpDescription& desc) override {
    return copy(out, in, desc);
  }
  WorkPtr do_send(const Tensor&, int dst, const OpDescription&) override {
    STRATA_FAIL("send: rank ", dst, " in a world of one process without MPI (nothing would receive it)");
  }
  WorkPtr do_recv(Tensor&, int src, const OpDescription&) override {
    STRATA_FAIL("recv: rank ", src, " in a world of one process without MPI (nothing would send it)");
  }
  WorkPtr do_barrier(const OpDescription& desc) override { return done(desc); }
  std::unique_ptr<ProcessGroup> do_split(const SplitPlan& plan, const OpDescription& desc) override {
    alive(desc);
    return std::make_unique<ProcessGroupLocal>(plan.name);
  }

 private:
  void alive(const OpDescription& desc) const {
    STRATA_CHECK(is_initialized(), desc.name, " on group '", name_,
                 "': the distributed runtime is not running "
                 "(dist::finalize was called or init was not)");
  }
  WorkPtr done(const OpDescription& desc) const {
    alive(desc);
    return std::make_unique<DoneWork>();
  }
  // The front door checked that out and in have the same dtype and size.
  WorkPtr copy(Tensor& out, const Tensor& in, const OpDescription& desc) const {
    alive(desc);
    if (out.numel() == 0 || out.data_ptr() == in.data_ptr()) return std::make_unique<DoneWork>();
    if (out.device().is_cpu() && in.device().is_cpu()) {
      std::memmove(out.raw_data(), in.raw_data(), in.nbytes());
    } else {  // CUDA tensors (or mixed): a device copy
      NoGradGuard no_grad;
      out.view({out.numel()}).copy_(in.view({in.numel()}));
    }
    return std::make_unique<DoneWork>();
  }
};

}  // namespace

std::unique_ptr<ProcessGroup> make_local_world() { return std::make_unique<ProcessGroupLocal>("world"); }

}  // namespace strata::dist::detail
