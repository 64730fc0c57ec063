// DistributedDataParallel: gradient buckets, hooks that launch each bucket's all_reduce as
// soon as its last gradient is accumulated, and the end-of-backward wait.
#include "strata/parallel/ddp.h"

#include <algorithm>
#include <sstream>
#include <unordered_set>

#include "parallel/parameter_check.h"
#include "strata/autograd/engine.h"
#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/tensor/factory.h"
#include "strata/ops/elementwise.h"

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

struct DistributedDataParallel::State : std::enable_shared_from_this<DistributedDataParallel::State> {
  struct Param {
    std::string name;
    Tensor tensor;
    Tensor view;  // its slot in the bucket
    int bucket = -1;
    bool ready = false;
  };
  struct Bucket {
    DType dtype = DType::Float32;
    Tensor buffer;
    std::vector<int> params;
    int pending = 0;
    bool launched = false;
    dist::WorkPtr work;
  };

  dist::ProcessGroup* group = nullptr;
  Device device = Device::cpu();  // the parameters' (one device per DDP, as in PyTorch)
  DDPOptions options;
  CommHook hook;
  bool sync = true;
  std::vector<Param> params;
  std::vector<Bucket> buckets;
  size_t next_launch = 0;
  bool pass_active = false;
  bool rebuilt = false;
  std::vector<int> ready_order;

  void build_buckets(const std::vector<int>& order);
  void reset_pass();
  void on_ready(int index);
  void repoint(Param& p);
  void launch_in_order(bool force);
  void finalize();
  void rebuild();
};

void DistributedDataParallel::State::build_buckets(const std::vector<int>& order) {
  NoGradGuard no_grad;
  std::vector<Bucket> next;
  std::vector<int64_t> offsets(params.size(), 0);
  std::vector<int64_t> sizes;  // elements per new bucket
  // One open bucket per dtype; a bucket closes when the next parameter would overflow it.
  std::vector<std::pair<DType, int>> open;
  std::vector<DType> first_done;
  for (int i : order) {
    const Tensor& t = params[i].tensor;
    const int64_t bytes = t.numel() * static_cast<int64_t>(dtype_size(t.dtype()));
    auto it = std::find_if(open.begin(), open.end(), [&](auto& o) { return o.first == t.dtype(); });
    if (it != open.end()) {
      const bool first = std::find(first_done.begin(), first_done.end(), t.dtype()) == first_done.end();
      const int64_t cap = first ? options.first_bucket_cap_bytes : options.bucket_cap_bytes;
      const int64_t have = sizes[it->second] * static_cast<int64_t>(dtype_size(t.dtype()));
      if (have + bytes > cap) {
        first_done.push_back(t.dtype());
        open.erase(it);
        it = open.end();
      }
    }
    if (it == open.end()) {
      next.emplace_back();
      next.back().dtype = t.dtype();
      sizes.push_back(0);
      open.emplace_back(t.dtype(), static_cast<int>(next.size()) - 1);
      it = open.end() - 1;
    }
    Bucket& b = next[it->second];
    offsets[i] = sizes[it->second];
    sizes[it->second] += t.numel();
    b.params.push_back(i);
  }
  for (size_t b = 0; b < next.size(); ++b) {
    next[b].buffer = zeros({sizes[b]}, {.dtype = next[b].dtype, .device = device});
    for (int i : next[b].params) {
      Param& p = params[i];
      Tensor view = next[b].buffer.narrow(0, offsets[i], p.tensor.numel()).view(p.tensor.shape());
      Tensor old = p.tensor.grad();
      if (old.defined()) view.copy_(old);  // a rebuild keeps the gradients already reduced
      p.view = view;
      p.bucket = static_cast<int>(b);
      p.tensor.set_grad(view);
    }
  }
  buckets = std::move(next);
  reset_pass();
}

void DistributedDataParallel::State::reset_pass() {
  for (Param& p : params) p.ready = false;
  for (Bucket& b : buckets) {
    b.pending = static_cast<int>(b.params.size());
    b.launched = false;
    b.work.reset();
  }
  next_launch = 0;
  pass_active = false;
}

// The gradient is no longer the bucket view (zero_grad(set_to_none), set_grad, or an
// optimizer that swapped it): copy it into the slot and make the view the gradient again.
void DistributedDataParallel::State::repoint(Param& p) {
  Tensor g = p.tensor.grad();
  if (g.defined() && g.data_ptr() == p.view.data_ptr() && g.is_contiguous()) return;
  NoGradGuard no_grad;
  if (g.defined()) {
    p.view.copy_(g);
  } else {
    p.view.zero_();
  }
  p.tensor.set_grad(p.view);
}

void DistributedDataParallel::State::on_ready(int index) {
  Param& p = params[index];
  repoint(p);
  if (!sync) return;
  if (!pass_active) {
    pass_active = true;
    if (!rebuilt) ready_order.clear();
    // The callback keeps the state alive even if the DDP object goes away mid-backward.
    autograd::queue_final_callback([self = shared_from_this()] { self->finalize(); });
  }
  STRATA_CHECK(!p.ready, "DistributedDataParallel: parameter '", p.name,
               "' was marked ready twice in one backward pass (is it registered twice?)");
  p.ready = true;
  if (!rebuilt) ready_order.push_back(index);
  --buckets[p.bucket].pending;
  if (options.overlap) launch_in_order(false);
}

void DistributedDataParallel::State::launch_in_order(bool force) {
  while (next_launch < buckets.size() && (force || buckets[next_launch].pending == 0)) {
    Bucket& b = buckets[next_launch];
    if (hook) {
      b.work = hook(b.buffer, *group);
    } else {
      b.work = group->all_reduce(b.buffer, options.average ? dist::ReduceOp::Avg : dist::ReduceOp::Sum);
    }
    b.launched = true;
    ++next_launch;
  }
}

void DistributedDataParallel::State::finalize() {
  std::vector<int> unused;
  for (size_t i = 0; i < params.size(); ++i)
    if (!params[i].ready) unused.push_back(static_cast<int>(i));
  for (int i : unused) {
    Param& p = params[i];
    if (options.find_unused_parameters) {
      repoint(p);  // reduced with what its .grad() holds (zero after zero_grad)
    } else {
      // An error (below), detected locally: the slot contributes zero, and every remaining
      // bucket is still reduced so that all ranks issue the same collectives.
      NoGradGuard no_grad;
      p.view.zero_();
      p.tensor.set_grad(p.view);
    }
    if (!rebuilt) ready_order.push_back(i);
    p.ready = true;
    --buckets[p.bucket].pending;
  }
  // Every bucket not launched yet (all of them without overlap), in order.
  launch_in_order(/*force=*/true);
  std::string comm_error;
  for (Bucket& b : buckets) {
    try {
      b.work->wait();
    } catch (const Error& e) {
      if (comm_error.empty()) comm_error = e.what();
    }
  }
  if (comm_error.empty() && hook && options.average && group->size() > 1) {
    NoGradGuard no_grad;
    for (Bucket& b : buckets) mul_(b.buffer, 1.0 / group->size());
  }
  const bool first_pass = !rebuilt;
  reset_pass();
  STRATA_CHECK(comm_error.empty(), "DistributedDataParallel: gradient reduction failed: ", comm_error);
  // The rebuild's broadcast comes before the unused-parameter error so that a rank that
  // throws has issued exactly the collectives of the ranks that do not.
  if (first_pass && options.rebuild_buckets) rebuild();
  if (!unused.empty() && !options.find_unused_parameters) {
    std::ostringstream os;
    os << "DistributedDataParallel: parameter '" << params[unused.front()].name
       << "' received no gradient in this backward pass on rank " << group->rank();
    if (unused.size() > 1) {
      os << " (" << unused.size() << " parameters had none:";
      for (size_t k = 0; k < unused.size() && k < 8; ++k) os << " '" << params[unused[k]].name << "'";
      if (unused.size() > 8) os << " ...";
      os << ")";
    }
    os << "; it was reduced as zero, so the ranks' gradients for it are not the average. If parameters "
          "are legitimately unused, pass find_unused_parameters = true";
    throw Error(os.str());
  }
}

// Buckets in the order rank 0's gradients became ready, so that early buckets complete early.
void DistributedDataParallel::State::rebuild() {
  const int64_t n = static_cast<int64_t>(params.size());
  std::vector<int64_t> mine(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) mine[static_cast<size_t>(i)] = ready_order.at(static_cast<size_t>(i));
  Tensor order = from_vector(mine, {n}).to(group->tensor_device());
  if (group->size() > 1) group->broadcast(order, 0)->wait();
  const std::vector<int64_t> rank0 = order.to_vector<int64_t>();
  std::vector<int> agreed(rank0.begin(), rank0.end());
  rebuilt = true;
  build_buckets(agreed);
}

DistributedDataParallel::NoSyncGuard::NoSyncGuard(DistributedDataParallel& ddp)
    : ddp_(ddp), previous_(ddp.state_->sync) {
  ddp_.state_->sync = false;
}
void DistributedDataParallel::sync_gradients() {
  State& s = *state_;
  STRATA_CHECK(!autograd::in_backward(), "DistributedDataParallel::sync_gradients: called during backward");
  STRATA_CHECK(s.sync, "DistributedDataParallel::sync_gradients: called inside no_sync()");
  if (!s.rebuilt) s.ready_order.clear();
  for (size_t i = s.params.size(); i-- > 0;) {  // the order backward usually makes them in
    State::Param& p = s.params[i];
    s.repoint(p);
    p.ready = true;
    if (!s.rebuilt) s.ready_order.push_back(static_cast<int>(i));
    --s.buckets[p.bucket].pending;
  }
  s.finalize();
}

DistributedDataParallel::NoSyncGuard::~NoSyncGuard() { ddp_.state_->sync = previous_; }

DistributedDataParallel::DistributedDataParallel(nn::Module& module, dist::ProcessGroup& group, DDPOptions options)
    : module_(module), group_(group), state_(std::make_shared<State>()) {
  STRATA_CHECK(options.bucket_cap_bytes > 0 && options.first_bucket_cap_bytes > 0,
               "DistributedDataParallel: bucket caps must be positive (got ", options.bucket_cap_bytes, " and ",
               options.first_bucket_cap_bytes, ")");
  State& s = *state_;
  s.group = &group;
  s.options = options;

  std::unordered_set<const void*> seen;
  std::vector<std::string> signature;
  for (auto& [name, t] : module.named_parameters()) {
    if (!t.requires_grad() || !seen.insert(t.impl_ptr().get()).second) continue;
    STRATA_CHECK(t.is_contiguous(), "DistributedDataParallel: parameter '", name, "' is not contiguous");
    if (s.params.empty()) s.device = t.device();
    STRATA_CHECK(t.device() == s.device, "DistributedDataParallel: parameter '", name, "' is on ", t.device(),
                 " but '", s.params.front().name, "' is on ", s.device,
                 "; a DDP module keeps its parameters on one device (move it with module.to(device))");
    signature.push_back(detail::describe_parameter(name, t));
    s.params.emplace_back();
    s.params.back().name = name;
    s.params.back().tensor = t;
  }

  // Every rank must hold the same parameter list; then rank 0's values everywhere.
  detail::check_same_parameters(group, signature, "DistributedDataParallel");
  std::vector<Tensor> tensors;
  for (auto& p : s.params) tensors.push_back(p.tensor);
  detail::broadcast_from_rank0(group, std::move(tensors), module, "DistributedDataParallel");

  std::vector<int> order;
  for (int i = static_cast<int>(s.params.size()) - 1; i >= 0; --i) order.push_back(i);
  s.build_buckets(order);
  s.rebuilt = !options.rebuild_buckets;

  std::weak_ptr<State> weak = state_;
  for (size_t i = 0; i < s.params.size(); ++i) {
    s.params[i].tensor.register_post_accumulate_grad_hook([weak, i](Tensor&) {
      if (auto st = weak.lock()) st->on_ready(static_cast<int>(i));
    });
  }
}

DistributedDataParallel::~DistributedDataParallel() = default;

const DDPOptions& DistributedDataParallel::options() const { return state_->options; }

void DistributedDataParallel::register_comm_hook(CommHook hook) { state_->hook = std::move(hook); }

std::vector<std::vector<std::string>> DistributedDataParallel::bucket_parameter_names() const {
  std::vector<std::vector<std::string>> out;
  for (const auto& b : state_->buckets) {
    out.emplace_back();
    for (int i : b.params) out.back().push_back(state_->params[i].name);
  }
  return out;
}

std::vector<int64_t> DistributedDataParallel::bucket_bytes() const {
  std::vector<int64_t> out;
  for (const auto& b : state_->buckets)
    out.push_back(b.buffer.numel() * static_cast<int64_t>(dtype_size(b.dtype)));
  return out;
}

bool DistributedDataParallel::buckets_rebuilt() const { return state_->rebuilt; }

}  // namespace strata::parallel
