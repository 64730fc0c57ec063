// DistributedDataParallel: the data-parallel path (data_parallel_state.h) at stage 0 without
// an optimizer, with DDP's options (first bucket cap, comm hooks, sum or average, the
// unused-parameter error, the bucket rebuild), and the 16-bit compression hooks.
#include "strata/parallel/ddp.h"

#include <utility>

#include "parallel/data_parallel_state.h"
#include "strata/autograd/engine.h"
#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/ops/elementwise.h"
#include "strata/tensor/factory.h"

namespace strata::parallel {

namespace {

// A 16-bit copy of the bucket is reduced; wait() widens the result back into the bucket.
class CompressedWork final : public dist::Work {
 public:
  CompressedWork(Tensor bucket, Tensor compressed, dist::WorkPtr inner)
      : bucket_(std::move(bucket)), compressed_(std::move(compressed)), inner_(std::move(inner)) {}
  bool is_completed() override { return inner_->is_completed(); }
  void wait() override {
    inner_->wait();
    finish();
  }
  void synchronize(std::chrono::milliseconds timeout) override {
    inner_->synchronize(timeout);
    finish();
  }
  void synchronize() override {
    inner_->synchronize();
    finish();
  }

 private:
  void finish() {
    if (done_) return;
    bucket_.copy_(compressed_);
    done_ = true;
  }
  Tensor bucket_;
  Tensor compressed_;
  dist::WorkPtr inner_;
  bool done_ = false;
};

CommHook compress_hook(DType dtype) {
  return [dtype](Tensor& bucket, dist::ProcessGroup& group) -> dist::WorkPtr {
    Tensor compressed = bucket.to(dtype);
    dist::WorkPtr inner = group.all_reduce(compressed, dist::ReduceOp::Sum);
    return std::make_unique<CompressedWork>(bucket, compressed, std::move(inner));
  };
}

}  // namespace

namespace ddp_hooks {
CommHook bf16_compress() { return compress_hook(DType::BFloat16); }
CommHook fp16_compress() { return compress_hook(DType::Float16); }
}  // namespace ddp_hooks

namespace {

// The path of DDP's own state, or with `experts` the expert parameters' state (with
// options.experts; an idle expert is no error there).
DataParallelOptions ddp_path(const DDPOptions& o, const dist::ProcessGroup& group, bool experts = false) {
  STRATA_CHECK(o.bucket_cap_bytes > 0 && o.first_bucket_cap_bytes > 0,
               "DistributedDataParallel: bucket caps must be positive (got ", o.bucket_cap_bytes, " and ",
               o.first_bucket_cap_bytes, ")");
  check_expert_group(o.experts, group, "DistributedDataParallel");
  DataParallelOptions dp{.zero = {},
                         .owner = "DistributedDataParallel",
                         .first_bucket_cap_bytes = o.first_bucket_cap_bytes,
                         .average = o.average,
                         .overlap = o.overlap,
                         .unused_is_error = !o.find_unused_parameters,
                         .rebuild_buckets = o.rebuild_buckets,
                         .has_optimizer = false};
  dp.zero.stage = 0;
  dp.zero.bucket_cap_bytes = o.bucket_cap_bytes;
  dp.zero.experts = o.experts;
  split_by_experts(dp, o.experts, experts);
  if (experts) {
    dp.owner = "DistributedDataParallel (expert parameters)";
    dp.unused_is_error = false;
  }
  return dp;
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(nn::Module& module, dist::ProcessGroup& group, DDPOptions options)
    : module_(module),
      group_(group),
      options_(std::move(options)),
      state_(make_data_parallel_state(module, group, ddp_path(options_, group))) {
  if (options_.experts.data != nullptr)
    experts_ = make_expert_state(module, state_, ddp_path(options_, group, true), expert_scaling_);
}

DistributedDataParallel::~DistributedDataParallel() {
  for (GradHookHandle& h : expert_scaling_) h.remove();
}

std::vector<DataParallelState*> DistributedDataParallel::states() const {
  if (experts_) return {state_.get(), experts_.get()};
  return {state_.get()};
}

const DDPOptions& DistributedDataParallel::options() const { return options_; }

DistributedDataParallel::NoSyncGuard::NoSyncGuard(DistributedDataParallel& ddp)
    : ddp_(ddp), previous_(ddp.state_->no_sync) {
  for (DataParallelState* s : ddp_.states()) s->no_sync = true;
}

DistributedDataParallel::NoSyncGuard::~NoSyncGuard() {
  for (DataParallelState* s : ddp_.states()) s->no_sync = previous_;
}

// Every parameter counts as ready with its current .grad(), in the order backward usually
// makes them, then the end of a synchronised backward runs.
void DistributedDataParallel::sync_gradients() {
  DataParallelState& s = *state_;
  STRATA_CHECK(!autograd::in_backward(), "DistributedDataParallel::sync_gradients: called during backward");
  STRATA_CHECK(!s.no_sync, "DistributedDataParallel::sync_gradients: called inside no_sync()");
  NoGradGuard no_grad;
  for (DataParallelState* st : states()) {
    if (!st->rebuilt) st->ready_order.clear();
    for (size_t i = st->params.size(); i-- > 0;)
      if (!st->params[i].ready) st->mark_ready(st->params[i]);
  }
  s.finalize_all();
}

void DistributedDataParallel::register_comm_hook(CommHook hook) {
  if (experts_) experts_->hook = hook;
  state_->hook = std::move(hook);
}

std::vector<std::vector<std::string>> DistributedDataParallel::bucket_parameter_names() const {
  std::vector<std::vector<std::string>> out;
  for (const DataParallelState* s : states())
    for (const auto& b : s->buckets) {
      out.emplace_back();
      for (int i : b.params) out.back().push_back(s->params[static_cast<size_t>(i)].name);
    }
  return out;
}

std::vector<int64_t> DistributedDataParallel::bucket_bytes() const {
  std::vector<int64_t> out;
  for (const DataParallelState* s : states())
    for (const auto& b : s->buckets) out.push_back(static_cast<int64_t>(b.grad->nbytes()));
  return out;
}

bool DistributedDataParallel::buckets_rebuilt() const { return state_->rebuilt; }

}  // namespace strata::parallel
