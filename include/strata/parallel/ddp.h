#pragma once
// Data parallelism: every rank holds the whole model, runs forward and backward on its own
// slice of the global batch, and DistributedDataParallel averages the gradients across the
// ranks while backward is still running.
//
//   auto& world = dist::init();
//   nn::GPT model(config);                       // same construction on every rank
//   DistributedDataParallel ddp(model, world);   // broadcasts rank 0's weights
//   optim::AdamW opt(model.parameters(), ...);
//   loss = model.loss(x, y); loss.backward();    // gradients are averaged when it returns
//   opt.step(); opt.zero_grad();                 // gradients to none (the next backward refills the buckets)
//
// DDP is ZeroOptimizer stage 0 without the optimizer: one data-parallel path (the same
// flat buckets, hooks and reductions, src/parallel/data_parallel_state.h). The parameters
// are moved into contiguous parameter buckets (each stays the same tensor, now a view), and
// their gradients into gradient buckets of the same layout.
//
// Gradients live in buckets: one contiguous tensor per bucket (one dtype each), filled in
// reverse registration order (the order backward usually produces them), the first bucket
// capped at first_bucket_cap_bytes, the others at bucket_cap_bytes. Each parameter's .grad()
// is a view into its bucket, so AccumulateGrad accumulates in place (after zero_grad's
// default, set to none, the next gradient is copied into the slot).
// When a bucket's last gradient has been accumulated, its all_reduce starts asynchronously
// and overlaps the rest of backward. Buckets start in index order on every rank (a bucket
// that is complete early waits for the ones before it), so the ranks issue the same
// collectives in the same order. At the end of backward (a final callback) DDP waits for
// every bucket. After the first synchronised backward the buckets are rebuilt in the order
// in which rank 0's gradients actually became ready (broadcast, so every rank agrees).
//
// The module's forward is called directly (DDP does not wrap it); DDP acts only through the
// gradient hooks, so any forward signature works.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strata/distributed/process_group.h"
#include "strata/nn/module.h"
#include "strata/parallel/expert_data_group.h"

namespace strata::parallel {

// Starts the reduction of one bucket. It must leave the SUM over the ranks in `bucket` once
// the returned Work's wait() has returned; DDP divides by the group size afterwards when
// averaging. The bucket stays alive and untouched until then.
using CommHook = std::function<dist::WorkPtr(Tensor& bucket, dist::ProcessGroup& group)>;

namespace ddp_hooks {
// Convert the bucket to bfloat16 / float16, all_reduce (the MPI backend sums 16-bit values in
// float32 and rounds once), convert back into the bucket. Halves the bytes on the wire (NCCL;
// the CPU backend widens 16-bit reductions to float32 on the wire, see docs/distributed.md).
CommHook bf16_compress();
CommHook fp16_compress();
}  // namespace ddp_hooks

struct DDPOptions {
  int64_t bucket_cap_bytes = int64_t{25} << 20;
  int64_t first_bucket_cap_bytes = int64_t{1} << 20;
  // A parameter that receives no gradient in a backward pass counts as zero on that rank.
  // After the buckets, one all_reduce of a flag per parameter finds those no rank had a
  // gradient for: they keep no .grad(), so the optimizer skips them as one process would.
  // Without it, a rank on which parameters received no gradient notices at the end of
  // backward, still reduces every remaining bucket (those parameters contribute zero, so
  // the ranks stay in step), and then throws, naming them. When every rank skips them,
  // every rank throws. When only some do, the other ranks return normally (those
  // parameters' gradients averaged with zeros from the skipping ranks); if the throwing
  // ranks then stop, the others fail at their next collective after the group's timeout,
  // naming the ranks that did not reach it (PyTorch's DDP behaves alike). A rank that
  // catches the error and carries on stays in step with the others.
  bool find_unused_parameters = false;
  bool average = true;  // false: gradients are summed over the ranks
  // Re-bucket once, after the first synchronised backward, in rank 0's gradient-ready order.
  bool rebuild_buckets = true;
  // (Last, so that existing designated initialisers keep their order.)
  // true: each bucket's all_reduce starts during backward as soon as its gradients are
  // ready. false: every bucket is reduced after backward, from the final callback (the same
  // collectives and results, no overlap; for measuring what overlap hides).
  bool overlap = true;
  // Expert parallelism beside DDP (expert_data_group.h): the expert parameters are reduced
  // over experts.data. An expert idle on every rank of it keeps no gradient, whatever
  // find_unused_parameters says (idle experts are routine, not a bug).
  ExpertDataGroup experts = {};
};

// The buckets, hooks and reductions (src/parallel/data_parallel_state.h).
struct DataParallelState;

class DistributedDataParallel {
 public:
  // Collective: every rank of `group` must construct it with a module of the same parameter
  // names, shapes and dtypes in the same order (checked; a mismatch throws on every rank,
  // naming the first differing parameter and the ranks involved). Rank 0's parameters and
  // buffers are broadcast to the others. The module must outlive this object.
  DistributedDataParallel(nn::Module& module, dist::ProcessGroup& group, DDPOptions options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  nn::Module& module() { return module_; }
  dist::ProcessGroup& group() { return group_; }
  const DDPOptions& options() const;

  // RAII: while alive, backward passes only accumulate gradients locally (no communication);
  // the next synchronised backward reduces the accumulated sum.
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallel& ddp);
    ~NoSyncGuard();
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool previous_;
  };
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(*this); }
  // Reduces now what backward passes under no_sync() accumulated, as a synchronised backward
  // would at its end (every parameter counts as ready with its current .grad()). For callers
  // whose backward passes all run under no_sync(), such as a pipeline whose model chunks
  // finish backward at different times. Not during backward or inside no_sync().
  void sync_gradients();

  // Replaces the all_reduce of each bucket (see CommHook); an empty function restores it.
  void register_comm_hook(CommHook hook);

  // Introspection (tests, benchmarks): parameter names per bucket in launch order, and the
  // bytes of each bucket.
  std::vector<std::vector<std::string>> bucket_parameter_names() const;
  std::vector<int64_t> bucket_bytes() const;
  bool buckets_rebuilt() const;

 private:
  nn::Module& module_;
  dist::ProcessGroup& group_;
  DDPOptions options_;
  std::shared_ptr<DataParallelState> state_;    // shared with the gradient hooks
  std::shared_ptr<DataParallelState> experts_;  // options.experts: the expert parameters' (state_ leads)
  std::vector<GradHookHandle> expert_scaling_;  // the experts' gradient scaling, removed with this object
  std::vector<DataParallelState*> states() const;
};

}  // namespace strata::parallel
