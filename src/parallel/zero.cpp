// ZeroOptimizer: buckets and shards, gradient hooks (all_reduce or reduce_scatter launched as
// soon as a bucket's gradients are complete), the end-of-backward flush, step and clipping.
// Stage 3's gather / free / prefetch of units lives in zero_stage3.cpp.
#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "optim/multi_tensor.h"
#include "parallel/parameter_check.h"
#include "strata/autograd/engine.h"
#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/tensor/factory.h"
#include "strata/ops/elementwise.h"
#include "tensor/rebind_storage.h"
#include "zero_state.h"

namespace strata::parallel {
namespace {

// dst += src for any floating dtype (16-bit values are summed in float and rounded once),
// on any device.
void accumulate_into(const Tensor& dst, const Tensor& src) {
  Tensor d = dst;
  if (dst.dtype() == DType::Float32 || dst.dtype() == DType::Float64) {
    add_(d, src);
    return;
  }
  STRATA_CHECK(dst.dtype() == DType::BFloat16 || dst.dtype() == DType::Float16, "ZeroOptimizer: gradients of dtype ",
               dst.dtype(), " cannot be accumulated");
  d.copy_(add(dst.to(DType::Float32), src.to(DType::Float32)));
}

bool arithmetic(DType d) { return d == DType::Float32 || d == DType::Float64; }

// The groups the caller gave, mapped to parameter indices; or one group of everything.
std::vector<int> assign_groups(const std::vector<ZeroOptimizer::State::Param>& params,
                               const std::vector<optim::ParamGroup>& groups) {
  std::vector<int> out(params.size(), 0);
  if (groups.empty()) return out;
  std::unordered_map<const TensorImpl*, size_t> index;
  for (size_t i = 0; i < params.size(); ++i) index[params[i].tensor.impl()] = i;
  std::vector<bool> seen(params.size(), false);
  for (size_t g = 0; g < groups.size(); ++g) {
    for (size_t k = 0; k < groups[g].params.size(); ++k) {
      const Tensor& t = groups[g].params[k];
      auto it = t.defined() ? index.find(t.impl()) : index.end();
      STRATA_CHECK(it != index.end(), "ZeroOptimizer: parameter ", k, " of group ", g,
                   " is not a trainable parameter of the module");
      STRATA_CHECK(!seen[it->second], "ZeroOptimizer: parameter '", params[it->second].name,
                   "' appears in more than one group (or twice in group ", g, ")");
      seen[it->second] = true;
      out[it->second] = static_cast<int>(g);
    }
  }
  for (size_t i = 0; i < params.size(); ++i)
    STRATA_CHECK(seen[i], "ZeroOptimizer: parameter '", params[i].name,
                 "' is in none of the parameter groups given; every trainable parameter must be in one");
  return out;
}

std::unique_ptr<optim::Optimizer> make_inner(const InnerOptimizer& inner, std::vector<optim::ParamGroup> groups,
                                             bool user_groups) {
  auto defaults = [&](double lr, double wd) {
    if (user_groups) return;
    groups[0].lr = lr;
    groups[0].weight_decay = wd;
    groups[0].initial_lr = 0.0;
  };
  if (auto* o = std::get_if<optim::SGDOptions>(&inner)) {
    defaults(o->lr, o->weight_decay);
    return std::make_unique<optim::SGD>(std::move(groups), *o);
  }
  if (auto* o = std::get_if<optim::AdamOptions>(&inner)) {
    defaults(o->lr, o->weight_decay);
    return std::make_unique<optim::Adam>(std::move(groups), *o);
  }
  if (auto* o = std::get_if<optim::AdamWOptions>(&inner)) {
    defaults(o->lr, o->weight_decay);
    return std::make_unique<optim::AdamW>(std::move(groups), *o);
  }
  const auto& factory = std::get<OptimizerFactory>(inner);
  STRATA_CHECK(factory != nullptr, "ZeroOptimizer: the optimizer factory is empty");
  auto out = factory(std::move(groups));
  STRATA_CHECK(out != nullptr, "ZeroOptimizer: the optimizer factory returned null");
  return out;
}

// --- construction, step by step ---

using State = ZeroOptimizer::State;

void check_options(const ZeroOptions& options) {
  STRATA_CHECK(options.stage >= 0 && options.stage <= 3, "ZeroOptimizer: stage ", options.stage,
               " is not a ZeRO stage; expected 0 (DDP), 1 (optimizer state), 2 (+ gradients) or 3 (+ parameters)");
  STRATA_CHECK(!options.master_dtype || *options.master_dtype == DType::Float32 ||
                   *options.master_dtype == DType::Float64,
               "ZeroOptimizer: master_dtype ", options.master_dtype.value_or(DType::Float32), " is not float32 or float64");
  STRATA_CHECK(options.bucket_cap_bytes > 0, "ZeroOptimizer: bucket_cap_bytes must be positive, got ",
               options.bucket_cap_bytes);
}

// The module's trainable parameters, each once, in registration order: CPU, contiguous, one dtype.
void collect_parameters(State& s, nn::Module& module) {
  std::unordered_set<const TensorImpl*> seen;
  for (auto& [name, t] : module.named_parameters()) {
    if (!t.requires_grad() || !seen.insert(t.impl()).second) continue;
    STRATA_CHECK(t.is_contiguous(), "ZeroOptimizer: parameter '", name, "' is not contiguous");
    if (!s.params.empty()) {
      STRATA_CHECK(t.device() == s.device, "ZeroOptimizer: parameter '", name, "' is on ", t.device(), " but '",
                   s.params.front().name, "' is on ", s.device,
                   "; the parameters must share one device (move the module with module.to(device))");
      STRATA_CHECK(t.dtype() == s.param_dtype, "ZeroOptimizer: parameter '", name, "' is ", t.dtype(), " but '",
                   s.params.front().name, "' is ", s.param_dtype, "; all parameters must share one dtype");
    }
    s.param_dtype = t.dtype();
    s.device = t.device();
    s.params.push_back({.name = name, .tensor = t});
  }
  STRATA_CHECK(!s.params.empty(), "ZeroOptimizer: the module has no trainable parameters");
}

// Every rank must hold the same parameters (a mismatch throws on every rank alike).
void check_same_parameters(dist::ProcessGroup& group, const std::vector<State::Param>& params) {
  std::vector<std::string> descriptions;
  for (const auto& p : params) descriptions.push_back(detail::describe_parameter(p.name, p.tensor));
  detail::check_same_parameters(group, descriptions, "ZeroOptimizer");
}

// Which parameters go into which bucket, in launch order.
struct BucketPlan {
  std::vector<std::vector<int>> members;  // parameter indices, per bucket
  std::vector<const nn::Module*> units;   // stage 3: each bucket's unit (null: the root unit)
  int root_bucket = -1;                   // stage 3: the bucket of the parameters in no unit
};

// Stages 0-2: size-capped buckets in reverse registration order (the order backward
// produces the gradients); a parameter larger than the cap gets a bucket of its own.
BucketPlan plan_size_buckets(const State& s) {
  BucketPlan plan;
  const int64_t elem = static_cast<int64_t>(dtype_size(s.param_dtype));
  int64_t have = 0;
  for (int i = static_cast<int>(s.params.size()) - 1; i >= 0; --i) {
    const int64_t bytes = s.params[static_cast<size_t>(i)].tensor.numel() * elem;
    if (plan.members.empty() || (have > 0 && have + bytes > s.options.bucket_cap_bytes)) {
      plan.members.emplace_back();
      plan.units.push_back(nullptr);
      have = 0;
    }
    plan.members.back().push_back(i);
    have += bytes;
  }
  return plan;
}

// Stage 3's units in registration order, each with the parameters it claims: a depth-first
// walk in which the outermost module that `is_unit` matches claims its whole subtree.
std::vector<std::pair<const nn::Module*, std::vector<int>>> find_units(const State& s, nn::Module& module,
                                                                       const nn::ModulePredicate& is_unit,
                                                                       std::vector<bool>& taken) {
  std::unordered_map<const TensorImpl*, int> index;
  for (size_t i = 0; i < s.params.size(); ++i) index[s.params[i].tensor.impl()] = static_cast<int>(i);
  std::vector<std::pair<const nn::Module*, std::vector<int>>> units;
  std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>> stack;
  auto children = module.named_children();
  for (auto it = children.rbegin(); it != children.rend(); ++it) stack.push_back(*it);
  while (!stack.empty()) {
    auto [name, child] = stack.back();
    stack.pop_back();
    if (is_unit(name, *child)) {
      std::vector<int> mine;
      for (auto& [pname, t] : child->named_parameters()) {
        auto it = index.find(t.impl());
        if (it == index.end() || taken[static_cast<size_t>(it->second)]) continue;
        taken[static_cast<size_t>(it->second)] = true;
        mine.push_back(it->second);
      }
      if (!mine.empty()) units.emplace_back(child.get(), std::move(mine));
      continue;
    }
    auto grand = child->named_children();
    for (auto it = grand.rbegin(); it != grand.rend(); ++it) stack.emplace_back(name + "." + it->first, it->second);
  }
  return units;
}

// Stage 3: one bucket per unit, units in reverse registration order and the root unit (the
// parameters in no unit) last, which is the order backward completes them.
BucketPlan plan_unit_buckets(const State& s, nn::Module& module) {
  nn::ModulePredicate is_unit = s.options.is_unit ? s.options.is_unit : nn::is_transformer_block;
  std::vector<bool> taken(s.params.size(), false);
  auto units = find_units(s, module, is_unit, taken);
  BucketPlan plan;
  for (auto it = units.rbegin(); it != units.rend(); ++it) {
    plan.members.push_back(it->second);
    plan.units.push_back(it->first);
  }
  std::vector<int> root;
  for (size_t i = 0; i < s.params.size(); ++i)
    if (!taken[i]) root.push_back(static_cast<int>(i));
  if (!root.empty()) {
    plan.members.push_back(root);
    plan.units.push_back(nullptr);
    plan.root_bucket = static_cast<int>(plan.members.size()) - 1;
  }
  return plan;
}

// Builds the buckets of `plan` and moves every parameter into its bucket: its values are
// copied there and it becomes a view of the bucket (the same TensorImpl, so modules,
// optimizers and autograd keep their handles).
void pack_buckets(State& s, BucketPlan plan) {
  int64_t global = 0;
  s.buckets.resize(plan.members.size());
  s.root_bucket = plan.root_bucket;
  for (size_t bi = 0; bi < plan.members.size(); ++bi) {
    State::Bucket& b = s.buckets[bi];
    b.params = std::move(plan.members[bi]);
    b.unit = plan.units[bi];
    std::vector<std::pair<std::string, Shape>> entries;
    for (int i : b.params) {
      const State::Param& p = s.params[static_cast<size_t>(i)];
      entries.emplace_back(p.name, p.tensor.shape());
    }
    b.param = std::make_unique<FlatBuffer>(s.param_dtype, entries, s.world, global);
    b.grad = std::make_unique<FlatBuffer>(s.param_dtype, entries, s.world, global);
    global += b.param->numel();
    b.param->allocate(s.device);
    for (size_t e = 0; e < b.params.size(); ++e) {
      State::Param& p = s.params[static_cast<size_t>(b.params[e])];
      p.bucket = static_cast<int>(bi);
      p.entry = e;
      b.param->view(e).copy_(p.tensor);
      const Tensor& bucket = b.param->data();
      detail::rebind_storage(p.tensor, bucket.storage(), bucket.offset() + b.param->entries()[e].offset);
    }
  }
}

// Rank 0's parameter values (one broadcast per bucket) and buffers everywhere.
void broadcast_buckets(State& s, nn::Module& module) {
  std::vector<Tensor> tensors;
  for (auto& b : s.buckets) tensors.push_back(b.param->data());
  detail::broadcast_from_rank0(*s.group, std::move(tensors), module, "ZeroOptimizer");
}

// This rank's part of bucket b: its parameter shard (stage 3: a copy, and the full bucket
// released), its gradients (stages 0-1: the full bucket, the parameters' .grad() views into
// it when the dtype allows; stages 2-3: only a shard) and its master weights.
void shard_bucket(State& s, State::Bucket& b) {
  const int stage = s.options.stage;
  const bool sharded = stage >= 1;
  b.own_begin = sharded ? b.param->shard_begin(s.rank) : 0;
  b.own_numel = sharded ? b.param->shard_numel() : b.param->numel();
  if (stage == 3) {
    b.param_shard = b.param->data().narrow(0, b.own_begin, b.own_numel).clone();
    b.param->release();
  } else {
    b.param_shard = b.param->data().narrow(0, b.own_begin, b.own_numel);
  }
  if (stage <= 1) {
    b.grad->allocate(s.device);
    b.grad_shard = b.grad->data().narrow(0, b.own_begin, b.own_numel);
    if (arithmetic(s.param_dtype)) {
      for (size_t e = 0; e < b.params.size(); ++e)
        s.params[static_cast<size_t>(b.params[e])].tensor.set_grad(b.grad->view(e));
    }
  } else {
    b.grad_shard = zeros({b.own_numel}, {.dtype = s.param_dtype, .device = s.device});
  }
  b.master_separate = s.param_dtype != s.master_dtype;
  b.master = b.master_separate ? b.param_shard.to(s.master_dtype) : b.param_shard;
}

// The parts of bucket b's entries in this rank's own range: at stage 0 every entry whole,
// otherwise their overlaps with the shard (offsets within the own range).
std::vector<FlatBuffer::Piece> own_pieces(const State& s, const State::Bucket& b) {
  if (s.options.stage >= 1) return b.param->pieces(s.rank);
  std::vector<FlatBuffer::Piece> all;
  const auto& entries = b.param->entries();
  for (size_t e = 0; e < entries.size(); ++e)
    all.push_back({.entry = e, .entry_offset = 0, .shard_offset = entries[e].offset, .numel = entries[e].numel});
  return all;
}

// What the inner optimizer updates in bucket b, added to the parameter's group: at stage 0
// whole parameters in their shapes, otherwise the 1-D overlaps of parameters with the shard.
void add_pieces(const State& s, State::Bucket& b, std::vector<optim::ParamGroup>& inner_groups) {
  for (const FlatBuffer::Piece& pc : own_pieces(s, b)) {
    Tensor piece = b.master.narrow(0, pc.shard_offset, pc.numel);
    if (s.options.stage == 0) piece = piece.view(b.param->entries()[pc.entry].shape);
    b.pieces.push_back(std::move(piece));
    b.piece_begin.push_back(pc.shard_offset);
    const int group = s.params[static_cast<size_t>(b.params[pc.entry])].group;
    inner_groups[static_cast<size_t>(group)].params.push_back(b.pieces.back());
  }
}

// Shards every bucket; returns the inner optimizer's groups (the user's lr and weight
// decay, and this rank's pieces).
std::vector<optim::ParamGroup> shard_buckets(State& s, const std::vector<optim::ParamGroup>& groups) {
  std::vector<optim::ParamGroup> inner_groups(static_cast<size_t>(s.num_groups));
  for (size_t g = 0; g < groups.size(); ++g) {
    inner_groups[g].lr = groups[g].lr;
    inner_groups[g].weight_decay = groups[g].weight_decay;
    inner_groups[g].initial_lr = groups[g].initial_lr;
  }
  for (State::Bucket& b : s.buckets) {
    shard_bucket(s, b);
    add_pieces(s, b, inner_groups);
  }
  return inner_groups;
}

// One post-accumulate-grad hook per parameter (plus stage 3's module hooks). The hooks hold
// the state weakly: they may outlive the optimizer.
void install_hooks(const std::shared_ptr<State>& state, nn::Module& module) {
  State& s = *state;
  std::weak_ptr<State> weak = state;
  for (size_t i = 0; i < s.params.size(); ++i) {
    s.params[i].tensor.register_post_accumulate_grad_hook([weak, i](Tensor&) {
      if (auto st = weak.lock()) st->on_ready(static_cast<int>(i));
    });
  }
  for (auto& b : s.buckets) b.pending = static_cast<int>(b.params.size());
  if (s.options.stage == 3) s.install_stage3_hooks(module);
}

}  // namespace

ZeroOptimizer::ZeroOptimizer(nn::Module& module, InnerOptimizer inner, dist::ProcessGroup& group, ZeroOptions options,
                             std::vector<optim::ParamGroup> groups)
    : module_(module), group_(group), state_(std::make_shared<State>()) {
  check_options(options);
  State& s = *state_;
  s.group = &group;
  s.options = std::move(options);
  s.rank = group.rank();
  s.world = group.size();

  collect_parameters(s, module);
  s.master_dtype = s.options.master_dtype.value_or(
      s.param_dtype == DType::BFloat16 || s.param_dtype == DType::Float16 ? DType::Float32 : s.param_dtype);
  check_same_parameters(group, s.params);
  const std::vector<int> param_group = assign_groups(s.params, groups);
  for (size_t i = 0; i < s.params.size(); ++i) s.params[i].group = param_group[i];
  s.num_groups = groups.empty() ? 1 : static_cast<int>(groups.size());

  BucketPlan plan = s.options.stage == 3 ? plan_unit_buckets(s, module) : plan_size_buckets(s);
  NoGradGuard no_grad;
  pack_buckets(s, std::move(plan));
  broadcast_buckets(s, module);
  std::vector<optim::ParamGroup> inner_groups = shard_buckets(s, groups);
  s.inner = make_inner(inner, std::move(inner_groups), !groups.empty());
  STRATA_CHECK(s.options.stage == 0 || s.inner->is_elementwise(), "ZeroOptimizer: stage ", s.options.stage,
               " shards the optimizer state, which needs an optimizer whose update is elementwise "
               "(Optimizer::is_elementwise(): SGD, Adam, AdamW); the optimizer given is not. Use stage 0 for it");
  install_hooks(state_, module);
}

ZeroOptimizer::~ZeroOptimizer() = default;

// --- gradients ---

namespace {

// Stages 0-1: the parameter's gradient lands in its slot of the gradient bucket. Float32/64
// keep the slot as .grad() (AccumulateGrad then adds in place); 16-bit gradients are added
// here (AccumulateGrad cannot add in place for them) and .grad() is cleared.
void gradient_into_bucket(const State& s, State::Param& p, State::Bucket& b) {
  Tensor g = p.tensor.grad();
  Tensor view = b.grad->view(p.entry);
  if (arithmetic(s.param_dtype)) {
    // Not the bucket view (set to none or replaced): it holds the whole gradient.
    if (g.defined() && !(g.data_ptr() == view.data_ptr() && g.is_contiguous())) view.copy_(g);
    p.tensor.set_grad(view);
  } else if (g.defined()) {
    accumulate_into(view, g);
    p.tensor.set_grad(Tensor());
  }
}

// Stages 2-3: a bucket's full gradient exists only while needed; this makes it exist (zero
// when it was released, or fresh).
void ensure_full_gradient(FlatBuffer& grad, Device device) {
  if (!grad.allocated()) {
    grad.allocate(device);
  } else if (grad.released()) {
    grad.reallocate();
    grad.data().zero_();
  }
}

}  // namespace

void ZeroOptimizer::State::on_ready(int index) {
  NoGradGuard no_grad;
  Param& p = params[static_cast<size_t>(index)];
  Bucket& b = buckets[static_cast<size_t>(p.bucket)];
  STRATA_CHECK(!(options.stage == 1 && reduced_in_place), "ZeroOptimizer: a second backward pass without zero_grad() "
               "at stage 1 (the gradient buckets were reduced in place by the first; stages 0, 2 and 3 accumulate)");
  if (no_sync && !pass_active) {
    accumulate_locally(p, b);
    return;
  }
  if (!pass_active) {
    pass_active = true;
    autograd::queue_final_callback([self = shared_from_this()] { self->finalize(); });
  }
  STRATA_CHECK(!p.ready, "ZeroOptimizer: parameter '", p.name,
               "' was marked ready twice in one backward pass (is it registered twice?)");
  p.ready = true;
  if (options.stage <= 1) {
    gradient_into_bucket(*this, p, b);
  } else {
    ensure_full_gradient(*b.grad, device);
    Tensor g = p.tensor.grad();
    if (g.defined()) {
      if (b.local_sums) {
        accumulate_into(b.grad->view(p.entry), g);  // onto the no_sync() micro-batches' sum
      } else {
        b.grad->view(p.entry).copy_(g);
      }
    }
    p.tensor.set_grad(Tensor());  // only the shard is kept
  }
  --b.pending;
  // Stage 3: the unit's backward is over once all its gradients are in; free its parameters
  // now rather than at the end of backward (a unit is gathered for its own backward only).
  if (options.stage == 3 && b.pending == 0 && !pinned) release_unit(p.bucket);
  launch_in_order(false);
  reclaim_completed();
}

// no_sync(): the gradient joins this rank's local sum, nothing is launched. Stages 0-1 sum in
// the gradient buckets as a synchronised pass does; stages 2-3 keep the full bucket.
void ZeroOptimizer::State::accumulate_locally(Param& p, Bucket& b) {
  unsynced = true;
  if (options.stage <= 1) {
    gradient_into_bucket(*this, p, b);
    return;
  }
  ensure_full_gradient(*b.grad, device);
  Tensor g = p.tensor.grad();
  if (g.defined()) accumulate_into(b.grad->view(p.entry), g);
  p.tensor.set_grad(Tensor());
  b.local_sums = true;
  if (options.stage == 3 && !local_pass_active) {
    // No finalize() runs for this pass: free the units at its end instead.
    local_pass_active = true;
    autograd::queue_final_callback([self = shared_from_this()] {
      self->local_pass_active = false;
      if (!self->pinned)
        for (size_t u = 0; u < self->buckets.size(); ++u) self->release_unit(static_cast<int>(u));
    });
  }
}

void ZeroOptimizer::State::launch_in_order(bool force) {
  while (next_launch < buckets.size() && (force || buckets[next_launch].pending == 0)) {
    launch(buckets[next_launch]);
    ++next_launch;
  }
}

void ZeroOptimizer::State::launch(Bucket& b) {
  if (options.stage == 0) {
    Tensor full = b.grad->data();
    b.work = group->all_reduce(full, dist::ReduceOp::Avg);
  } else if (options.stage == 1) {
    // Not into grad_shard itself: it is a chunk of the input, and the process group would
    // send from a clone of the whole bucket (MPI forbids aliased buffers); a chunk-sized
    // output costs 1/N of that. finalize() copies it into the shard.
    b.reduce_out = empty({b.own_numel}, {.dtype = param_dtype, .device = device});
    b.work = group->reduce_scatter(b.reduce_out, b.grad->data(), dist::ReduceOp::Avg);
  } else {
    if (!b.grad->allocated() || b.grad->released()) {  // no gradient reached this bucket
      if (!b.grad->allocated()) b.grad->allocate(device);
      b.grad->reallocate();
      b.grad->data().zero_();
    }
    b.reduce_out = b.shard_clean ? b.grad_shard : empty({b.own_numel}, {.dtype = param_dtype, .device = device});
    b.work = group->reduce_scatter(b.reduce_out, b.grad->data(), dist::ReduceOp::Avg);
  }
  b.launched = true;
}

// Stages 2-3: a bucket's full gradient is needed only until its reduce_scatter is done. Each
// gradient hook frees the buckets whose reduce_scatter has completed (without blocking), so
// that at most the buckets still in flight hold full gradients; finalize() does the rest.
// Stage 1: the same for the chunk-sized outputs.
void ZeroOptimizer::State::reclaim_completed() {
  if (options.stage < 1) return;
  for (size_t i = 0; i < next_launch; ++i) {
    Bucket& b = buckets[i];
    if (!b.work || !b.work->is_completed()) continue;
    try {
      b.work->wait();
    } catch (const Error& e) {
      if (reclaim_error.empty()) reclaim_error = e.what();
      b.work.reset();
      continue;
    }
    b.work.reset();
    finish_reduced_bucket(b);
  }
}

// Stages 1-3, once a bucket's reduce_scatter is done: its result joins the gradient shard
// (stage 1: replaces it) and, at stages 2-3, the full gradient is freed.
void ZeroOptimizer::State::finish_reduced_bucket(Bucket& b) {
  if (options.stage == 1) {
    if (b.reduce_out.defined()) b.grad_shard.copy_(b.reduce_out);
    b.reduce_out = Tensor();
    return;
  }
  if (!b.reduce_out.is_same(b.grad_shard) && b.reduce_out.defined()) accumulate_into(b.grad_shard, b.reduce_out);
  b.reduce_out = Tensor();
  b.shard_clean = false;
  b.local_sums = false;  // no_sync() sums, if any, were part of this reduction
  if (b.grad->allocated() && !b.grad->released()) b.grad->release();
}

void ZeroOptimizer::State::finalize() {
  NoGradGuard no_grad;
  // A parameter that received no gradient counts as zero (its slot is zero after zero_grad).
  for (Param& p : params) {
    if (p.ready) continue;
    p.ready = true;
    if (options.stage <= 1 && arithmetic(param_dtype)) {
      Tensor view = buckets[static_cast<size_t>(p.bucket)].grad->view(p.entry);
      Tensor g = p.tensor.grad();
      if (g.defined() && !(g.data_ptr() == view.data_ptr())) view.copy_(g);
      p.tensor.set_grad(view);
    }
    --buckets[static_cast<size_t>(p.bucket)].pending;
  }
  launch_in_order(true);
  std::string error = std::move(reclaim_error);
  reclaim_error.clear();
  for (Bucket& b : buckets) {
    try {
      if (b.work) b.work->wait();
    } catch (const Error& e) {
      if (error.empty()) error = e.what();
    }
  }
  for (size_t i = 0; i < buckets.size(); ++i) {
    Bucket& b = buckets[i];
    const bool pending_result = b.work != nullptr;  // not yet finished by reclaim_completed()
    b.work.reset();
    b.launched = false;
    b.pending = static_cast<int>(b.params.size());
    if (options.stage >= 1) {
      // Done already by reclaim_completed(), or no usable result (a failed reduction).
      if (!pending_result || !error.empty()) b.reduce_out = Tensor();
      finish_reduced_bucket(b);
    }
  }
  for (Param& p : params) p.ready = false;
  next_launch = 0;
  pass_active = false;
  if (options.stage == 1) reduced_in_place = true;
  unsynced = false;
  if (options.stage == 3 && !pinned) {
    for (size_t b = 0; b < buckets.size(); ++b) release_unit(static_cast<int>(b));
  }
  STRATA_CHECK(error.empty(), "ZeroOptimizer: gradient reduction failed: ", error);
  drop_master_grads();
  prepare_master_grads();
}

// The inner optimizer reads the gradient of each piece from master_grad (a view of the
// gradient shard, or its conversion to the master dtype).
void ZeroOptimizer::State::prepare_master_grads() {
  NoGradGuard no_grad;
  for (Bucket& b : buckets) {
    b.master_grad = b.master_separate ? b.grad_shard.to(master_dtype) : b.grad_shard;
    for (size_t k = 0; k < b.pieces.size(); ++k) {
      Tensor& piece = b.pieces[k];
      piece.set_grad(b.master_grad.narrow(0, b.piece_begin[k], piece.numel()).view(piece.shape()));
    }
  }
  grads_prepared = true;
}

void ZeroOptimizer::State::drop_master_grads() {
  for (Bucket& b : buckets) {
    for (Tensor& piece : b.pieces) piece.set_grad(Tensor());
    b.master_grad = Tensor();
  }
  grads_prepared = false;
}

// --- the public API ---

void ZeroOptimizer::sync_gradients() {
  State& s = *state_;
  STRATA_CHECK(!autograd::in_backward(), "ZeroOptimizer::sync_gradients: called during backward");
  STRATA_CHECK(!s.no_sync, "ZeroOptimizer::sync_gradients: called inside no_sync()");
  STRATA_CHECK(!(s.options.stage == 1 && s.reduced_in_place), "ZeroOptimizer::sync_gradients: the gradients were "
               "reduced already since the last zero_grad() (stage 1 reduces the buckets in place)");
  s.finalize();
}

Tensor ZeroOptimizer::local_gradient(const std::string& name) {
  State& s = *state_;
  STRATA_CHECK(s.options.stage <= 2, "ZeroOptimizer::local_gradient: stage ", s.options.stage,
               " keeps no full gradient of '", name, "' (stages 0-2 do)");
  auto it = std::find_if(s.params.begin(), s.params.end(), [&](const State::Param& p) { return p.name == name; });
  STRATA_CHECK(it != s.params.end(), "ZeroOptimizer::local_gradient: no parameter named '", name, "'");
  NoGradGuard no_grad;
  State::Bucket& b = s.buckets[static_cast<size_t>(it->bucket)];
  if (s.options.stage <= 1) {
    gradient_into_bucket(s, *it, b);  // the bucket slot holds the sum from now on
  } else {
    ensure_full_gradient(*b.grad, s.device);
    b.local_sums = true;
  }
  s.unsynced = true;
  return b.grad->view(it->entry);
}

ZeroOptimizer::NoSyncGuard::NoSyncGuard(ZeroOptimizer& zero) : zero_(zero), previous_(zero.state_->no_sync) {
  STRATA_CHECK(!autograd::in_backward(), "ZeroOptimizer::no_sync: called during backward");
  zero_.state_->no_sync = true;
}
ZeroOptimizer::NoSyncGuard::~NoSyncGuard() { zero_.state_->no_sync = previous_; }

void ZeroOptimizer::zero_grad() {
  NoGradGuard no_grad;
  State& s = *state_;
  STRATA_CHECK(!autograd::in_backward(), "ZeroOptimizer::zero_grad: called during backward");
  for (State::Bucket& b : s.buckets) {
    if (s.options.stage <= 1) {
      b.grad->data().zero_();
    } else {
      b.grad_shard.zero_();
      b.shard_clean = true;
      if (b.local_sums && b.grad->allocated() && !b.grad->released()) b.grad->release();  // no_sync() sums
      b.local_sums = false;
    }
  }
  s.unsynced = false;
  if (s.options.stage >= 2 || !arithmetic(s.param_dtype)) {
    for (auto& p : s.params) p.tensor.set_grad(Tensor());
  }
  s.reduced_in_place = false;
  s.drop_master_grads();
}

void ZeroOptimizer::step() {
  NoGradGuard no_grad;
  State& s = *state_;
  STRATA_CHECK(!autograd::in_backward(), "ZeroOptimizer::step: called during backward");
  STRATA_CHECK(!s.unsynced, "ZeroOptimizer::step: the gradients of backward passes under no_sync() are not reduced "
               "yet; run one synchronised backward (outside no_sync()) before step()");
  if (!s.grads_prepared) s.prepare_master_grads();
  s.inner->step();
  for (State::Bucket& b : s.buckets) {
    if (b.master_separate) b.param_shard.copy_(b.master);
  }
  if (s.options.stage == 1 || s.options.stage == 2) {
    std::vector<dist::WorkPtr> works;
    for (State::Bucket& b : s.buckets) {
      Tensor full = b.param->data();
      works.push_back(s.group->all_gather(full, b.param_shard));
    }
    for (auto& w : works) w->wait();
  }
  s.drop_master_grads();
}

bool ZeroOptimizer::unscale_gradients(double factor) {
  State& s = *state_;
  STRATA_CHECK(!s.unsynced, "ZeroOptimizer::unscale_gradients: the gradients of backward passes under no_sync() are "
               "not reduced yet; run one synchronised backward (outside no_sync()) first");
  if (!s.grads_prepared) s.prepare_master_grads();
  std::vector<Tensor> shards;
  for (State::Bucket& b : s.buckets) shards.push_back(b.master_grad);
  double found = optim::multi_tensor::unscale_and_check(shards, factor) ? 1.0 : 0.0;
  // A shard is one rank's: only its owner may see the inf. Agree on it (max of 0/1).
  for (dist::ProcessGroup* g : {s.options.stage >= 1 ? s.group : nullptr, s.options.tensor_parallel.group,
                                s.options.pipeline_parallel.group}) {
    if (g == nullptr || g->size() == 1) continue;
    Tensor t = full({1}, found, {.dtype = DType::Float64, .device = g->tensor_device()});
    g->all_reduce(t, dist::ReduceOp::Max)->wait();
    found = t.item();
  }
  return found != 0.0;
}

double ZeroOptimizer::clip_grad_norm(double max_norm) {
  NoGradGuard no_grad;
  State& s = *state_;
  STRATA_CHECK(!s.unsynced, "ZeroOptimizer::clip_grad_norm: the gradients of backward passes under no_sync() are "
               "not reduced yet; run one synchronised backward (outside no_sync()) first");
  STRATA_CHECK(std::isfinite(max_norm) && max_norm > 0, "ZeroOptimizer::clip_grad_norm: max_norm ", max_norm,
               " must be finite and > 0");
  if (!s.grads_prepared) s.prepare_master_grads();
  // Squares of this rank's shard, split parameters apart from replicated ones when tensor
  // parallelism runs beside ZeRO; summed over ZeRO's group, then the split part over the
  // tensor-parallel group (a replicated parameter is the same on every TP rank: once).
  const ZeroOptions::TensorParallel& tp = s.options.tensor_parallel;
  const ZeroOptions::PipelineParallel& pp = s.options.pipeline_parallel;
  // Squares in multi_tensor's fixed order (the same bits on either device and any thread
  // count): one pass over every split piece and one over the rest, not one per piece (on a
  // GPU each pass returns its sum to the host).
  std::vector<Tensor> split_parts, replicated_parts;
  for (State::Bucket& b : s.buckets) {
    if (tp.group == nullptr && !pp.duplicate) {
      replicated_parts.push_back(b.master_grad);
      continue;
    }
    for (const FlatBuffer::Piece& piece : own_pieces(s, b)) {
      const std::string& name = b.param->entries()[piece.entry].name;
      if (pp.duplicate && pp.duplicate(name)) continue;
      (tp.group != nullptr && tp.is_split(name) ? split_parts : replicated_parts)
          .push_back(b.master_grad.narrow(0, piece.shard_offset, piece.numel));
    }
  }
  double split = optim::multi_tensor::sum_of_squares(split_parts);
  double replicated = optim::multi_tensor::sum_of_squares(replicated_parts);
  // Sums over the groups, made on each group's own device (NCCL takes CUDA tensors only).
  auto group_sum = [](dist::ProcessGroup& g, std::vector<double> values) {
    const int64_t n = static_cast<int64_t>(values.size());
    Tensor t = from_vector(values, {n}).to(g.tensor_device());
    g.all_reduce(t, dist::ReduceOp::Sum)->wait();
    return t.to_vector<double>();
  };
  if (s.options.stage >= 1 && s.world > 1) {
    const std::vector<double> both = group_sum(*s.group, {split, replicated});
    split = both[0];
    replicated = both[1];
  }
  if (tp.group != nullptr && tp.group->size() > 1) split = group_sum(*tp.group, {split})[0];
  double sum = split + replicated;
  if (pp.group != nullptr && pp.group->size() > 1) sum = group_sum(*pp.group, {sum})[0];  // every stage's squares
  const double norm = std::sqrt(sum);
  if (!std::isfinite(norm)) return norm;
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0) {
    for (State::Bucket& b : s.buckets) mul_(b.master_grad, coef);
  }
  return norm;
}

optim::Optimizer& ZeroOptimizer::optimizer() { return *state_->inner; }
int ZeroOptimizer::stage() const { return state_->options.stage; }
const ZeroOptions& ZeroOptimizer::options() const { return state_->options; }

ZeroMemory ZeroOptimizer::memory() const {
  const State& s = *state_;
  ZeroMemory m;
  for (const State::Bucket& b : s.buckets) {
    m.parameters += static_cast<int64_t>(s.options.stage == 3 ? b.param_shard.nbytes() : b.param->nbytes());
    m.gradients += static_cast<int64_t>(s.options.stage <= 1 ? b.grad->nbytes() : b.grad_shard.nbytes());
    if (b.master_separate) m.master += static_cast<int64_t>(b.master.nbytes());
    m.padding_elements += b.param->padding();
  }
  for (const auto& [key, t] : s.inner->state_dict())
    if (key.rfind("state.", 0) == 0) m.optimizer_state += static_cast<int64_t>(t.nbytes());
  return m;
}

std::vector<std::vector<std::string>> ZeroOptimizer::bucket_parameter_names() const {
  std::vector<std::vector<std::string>> out;
  for (const auto& b : state_->buckets) {
    out.emplace_back();
    for (int i : b.params) out.back().push_back(state_->params[static_cast<size_t>(i)].name);
  }
  return out;
}

std::vector<int64_t> ZeroOptimizer::bucket_bytes() const {
  std::vector<int64_t> out;
  for (const auto& b : state_->buckets) out.push_back(static_cast<int64_t>(b.param->nbytes()));
  return out;
}

}  // namespace strata::parallel
