// The data-parallel path's construction (data_parallel_state.h): the parameters, their
// buckets (size-capped, or one per unit at stage 3), the shards of each bucket, the hooks, and
// DistributedDataParallel's one rebuild in the order rank 0's gradients became ready.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "parallel/data_parallel_state.h"
#include "parallel/parameter_check.h"
#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/ops/elementwise.h"
#include "strata/parallel/expert_parallel.h"
#include "strata/tensor/factory.h"
#include "tensor/rebind_storage.h"

namespace strata::parallel {
namespace {

using State = DataParallelState;

// The module's trainable parameters, each once, in registration order, contiguous, on one
// device; with an optimizer also of one dtype.
void collect_parameters(State& s, nn::Module& module) {
  const char* owner = s.dp.owner;
  std::unordered_set<const TensorImpl*> seen;
  for (auto& [name, t] : module.named_parameters()) {
    if (!t.requires_grad() || !seen.insert(t.impl()).second) continue;
    if (s.dp.include && !s.dp.include(name)) continue;
    STRATA_CHECK(t.is_contiguous(), owner, ": parameter '", name, "' is not contiguous");
    if (!s.params.empty()) {
      STRATA_CHECK(t.device() == s.device, owner, ": parameter '", name, "' is on ", t.device(), " but '",
                   s.params.front().name, "' is on ", s.device,
                   "; the parameters must share one device (move the module with module.to(device))");
      STRATA_CHECK(!s.dp.has_optimizer || t.dtype() == s.param_dtype, owner, ": parameter '", name, "' is ", t.dtype(),
                   " but '", s.params.front().name, "' is ", s.param_dtype, "; all parameters must share one dtype");
    } else {
      s.param_dtype = t.dtype();
      s.device = t.device();
    }
    s.params.push_back({.name = name, .tensor = t});
  }
  STRATA_CHECK(!s.dp.has_optimizer || !s.params.empty(), owner, ": the module has no trainable parameters");
}

// Every rank must hold the same parameters (a mismatch throws on every rank alike).
void check_same_parameters(State& s) {
  std::vector<std::string> descriptions;
  for (const auto& p : s.params) descriptions.push_back(strata::detail::describe_parameter(p.name, p.tensor));
  strata::detail::check_same_parameters(*s.group, descriptions, s.dp.owner);
  if (s.options.replicate != nullptr)
    strata::detail::check_same_parameters(*s.options.replicate, descriptions, s.dp.owner);
}

// Which parameters go into which bucket, in launch order.
struct BucketPlan {
  std::vector<std::vector<int>> members;  // parameter indices, per bucket
  std::vector<DType> dtypes;
  std::vector<const nn::Module*> units;  // stage 3: each bucket's unit (null: the root unit)
  int root_bucket = -1;                  // stage 3: the bucket of the parameters in no unit
};

// Stages 0-2: size-capped buckets over `order` (reverse registration order: the order
// backward produces the gradients), one open bucket per dtype; the first bucket of a dtype
// is capped at first_bucket_cap_bytes. A parameter larger than the cap gets a bucket of its own.
BucketPlan plan_size_buckets(const State& s, const std::vector<int>& order) {
  BucketPlan plan;
  std::vector<int64_t> have;                   // bytes per planned bucket
  std::vector<std::pair<DType, size_t>> open;  // the open bucket of each dtype
  std::vector<DType> first_closed;
  const int64_t first_cap = s.dp.first_bucket_cap_bytes > 0 ? s.dp.first_bucket_cap_bytes : s.options.bucket_cap_bytes;
  for (int i : order) {
    const Tensor& t = s.params[static_cast<size_t>(i)].tensor;
    const int64_t bytes = t.numel() * static_cast<int64_t>(dtype_size(t.dtype()));
    auto it = std::find_if(open.begin(), open.end(), [&](const auto& o) { return o.first == t.dtype(); });
    if (it != open.end()) {
      const bool first = std::find(first_closed.begin(), first_closed.end(), t.dtype()) == first_closed.end();
      if (have[it->second] + bytes > (first ? first_cap : s.options.bucket_cap_bytes)) {
        first_closed.push_back(t.dtype());
        open.erase(it);
        it = open.end();
      }
    }
    if (it == open.end()) {
      plan.members.emplace_back();
      plan.dtypes.push_back(t.dtype());
      plan.units.push_back(nullptr);
      have.push_back(0);
      open.emplace_back(t.dtype(), plan.members.size() - 1);
      it = open.end() - 1;
    }
    plan.members[it->second].push_back(i);
    have[it->second] += bytes;
  }
  return plan;
}

std::vector<int> reverse_registration_order(const State& s) {
  std::vector<int> order;
  for (int i = static_cast<int>(s.params.size()) - 1; i >= 0; --i) order.push_back(i);
  return order;
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
  plan.dtypes.assign(plan.members.size(), s.param_dtype);
  return plan;
}

// Builds the buckets of `plan` and moves every parameter into its bucket: its values are
// copied there and it becomes a view of the bucket (the same TensorImpl, so modules,
// optimizers and autograd keep their handles). Stage 0 shards nothing, so it pads nothing.
void pack_buckets(State& s, BucketPlan plan) {
  const int shards = s.options.stage == 0 ? 1 : s.world;
  int64_t global = 0;
  s.buckets.clear();
  s.buckets.resize(plan.members.size());
  s.root_bucket = plan.root_bucket;
  for (size_t bi = 0; bi < plan.members.size(); ++bi) {
    State::Bucket& b = s.buckets[bi];
    b.params = std::move(plan.members[bi]);
    b.dtype = plan.dtypes[bi];
    b.unit = plan.units[bi];
    std::vector<std::pair<std::string, Shape>> entries;
    for (int i : b.params) {
      const State::Param& p = s.params[static_cast<size_t>(i)];
      entries.emplace_back(p.name, p.tensor.shape());
    }
    b.param = std::make_unique<FlatBuffer>(b.dtype, entries, shards, global);
    b.grad = std::make_unique<FlatBuffer>(b.dtype, entries, shards, global);
    global += b.param->numel();
    b.param->allocate(s.device);
    for (size_t e = 0; e < b.params.size(); ++e) {
      State::Param& p = s.params[static_cast<size_t>(b.params[e])];
      p.bucket = static_cast<int>(bi);
      p.entry = e;
      b.param->view(e).copy_(p.tensor);
      const Tensor& bucket = b.param->data();
      strata::detail::rebind_storage(p.tensor, bucket.storage(), bucket.offset() + b.param->entries()[e].offset);
    }
    b.pending = static_cast<int>(b.params.size());
  }
}

// Rank 0's parameter values (one broadcast per bucket) and buffers everywhere.
void broadcast_buckets(State& s, nn::Module& module) {
  std::vector<Tensor> tensors;
  for (auto& b : s.buckets) tensors.push_back(b.param->data());
  // HSDP: rank 0 of each shard group first takes the values of rank 0 of the data group.
  nn::Module* buffers_of = s.dp.broadcast_buffers ? &module : nullptr;
  if (s.options.replicate != nullptr)
    strata::detail::broadcast_from_rank0(*s.options.replicate, tensors, buffers_of, s.dp.owner);
  strata::detail::broadcast_from_rank0(*s.group, std::move(tensors), buffers_of, s.dp.owner);
}

// This rank's part of bucket b: its parameter shard (stage 3: a copy, and the full bucket
// released), its gradients (stages 0-1: the full bucket, the parameters' .grad() views into
// it when the dtype allows; stages 2-3: only a shard) and, with an optimizer, its master weights.
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
  // The parameters' .grad() stay as they are: the first gradient a backward hands a
  // parameter becomes its slot (gradient_into_bucket), so a parameter no backward reached
  // has none, as in one process.
  if (stage <= 1) {
    b.grad->allocate(s.device);
    b.grad_shard = b.grad->data().narrow(0, b.own_begin, b.own_numel);
  } else {
    b.grad_shard = zeros({b.own_numel}, {.dtype = b.dtype, .device = s.device});
  }
  b.master_separate = s.dp.has_optimizer && b.dtype != s.master_dtype;
  b.master = b.master_separate ? b.param_shard.to(s.master_dtype) : b.param_shard;
}

// One post-accumulate-grad hook per parameter (plus stage 3's module hooks). The hooks hold
// the state weakly: they may outlive the public object.
void install_hooks(const std::shared_ptr<State>& state, nn::Module& module) {
  State& s = *state;
  std::weak_ptr<State> weak = state;
  for (size_t i = 0; i < s.params.size(); ++i) {
    s.params[i].tensor.register_post_accumulate_grad_hook([weak, i](Tensor&) {
      if (auto st = weak.lock()) st->on_ready(static_cast<int>(i));
    });
  }
  if (s.options.stage == 3) s.install_stage3_hooks(module);
}

}  // namespace

std::vector<FlatBuffer::Piece> own_pieces(const State& s, const State::Bucket& b) {
  if (s.options.stage >= 1) return b.param->pieces(s.rank);
  std::vector<FlatBuffer::Piece> all;
  const auto& entries = b.param->entries();
  for (size_t e = 0; e < entries.size(); ++e)
    all.push_back({.entry = e, .entry_offset = 0, .shard_offset = entries[e].offset, .numel = entries[e].numel});
  return all;
}

std::shared_ptr<DataParallelState> make_data_parallel_state(nn::Module& module, dist::ProcessGroup& group,
                                                            DataParallelOptions options) {
  auto state = std::make_shared<State>();
  State& s = *state;
  s.group = &group;
  s.dp = std::move(options);
  s.rank = group.rank();
  s.world = group.size();
  s.rebuilt = !(s.dp.rebuild_buckets && !s.dp.has_optimizer && s.options.stage == 0);
  collect_parameters(s, module);
  s.master_dtype = s.options.master_dtype.value_or(
      s.param_dtype == DType::BFloat16 || s.param_dtype == DType::Float16 ? DType::Float32 : s.param_dtype);
  check_same_parameters(s);
  BucketPlan plan =
      s.options.stage == 3 ? plan_unit_buckets(s, module) : plan_size_buckets(s, reverse_registration_order(s));
  NoGradGuard no_grad;
  pack_buckets(s, std::move(plan));
  broadcast_buckets(s, module);
  for (State::Bucket& b : s.buckets) shard_bucket(s, b);
  install_hooks(state, module);
  return state;
}

void split_by_experts(DataParallelOptions& dp, const ExpertDataGroup& experts, bool take_experts) {
  if (experts.data == nullptr) return;
  std::function<bool(const std::string&)> is_expert = experts.is_expert ? experts.is_expert : is_expert_parameter;
  if (take_experts) {
    dp.include = std::move(is_expert);
    dp.broadcast_buffers = false;  // the shared parameters' state broadcasts them
  } else {
    dp.include = [is_expert](const std::string& name) { return !is_expert(name); };
  }
}

void check_expert_group(const ExpertDataGroup& experts, const dist::ProcessGroup& group, const char* owner) {
  const dist::ProcessGroup* data = experts.data;
  if (data == nullptr) return;
  const std::vector<int>& all = group.global_ranks();
  for (int r : data->global_ranks())
    STRATA_CHECK(std::find(all.begin(), all.end(), r) != all.end(), owner, ": world rank ", r,
                 " of the expert-data group '", data->name(), "' is not in the data-parallel group '", group.name(),
                 "' (the expert-data group is MeshDim::ExpertData inside MeshDim::DataContext)");
  STRATA_CHECK(group.size() % data->size() == 0, owner, ": the expert-data group '", data->name(), "' (", data->size(),
               " ranks) does not divide the data-parallel group '", group.name(), "' (", group.size(), " ranks)");
}

std::shared_ptr<DataParallelState> make_expert_state(nn::Module& module,
                                                     const std::shared_ptr<DataParallelState>& leader,
                                                     DataParallelOptions options,
                                                     std::vector<GradHookHandle>& scaling) {
  dist::ProcessGroup& data = *options.zero.experts.data;  // read before `options` moves
  auto state = make_data_parallel_state(module, data, std::move(options));
  leader->follower = state;
  state->leader = leader;
  const double scale = static_cast<double>(state->world) / static_cast<double>(leader->world);
  if (scale != 1.0)
    for (State::Param& p : state->params)
      scaling.push_back(p.tensor.register_hook([scale](const Tensor& g) { return mul(g, scale); }));
  return state;
}

// Buckets in the order rank 0's gradients became ready, so that early buckets complete early
// (stage 0 without an optimizer: nothing else views the buckets). The gradients already
// reduced move with their parameters.
void DataParallelState::rebuild() {
  NoGradGuard no_grad;
  const int64_t n = static_cast<int64_t>(params.size());
  std::vector<int64_t> mine(ready_order.begin(), ready_order.end());
  STRATA_CHECK(static_cast<int64_t>(mine.size()) == n, dp.owner, ": rebuild saw ", mine.size(), " ready parameters of ",
               n);
  Tensor order = from_vector(mine, {n}).to(group->tensor_device());
  if (group->size() > 1) group->broadcast(order, 0)->wait();
  const std::vector<int64_t> rank0 = order.to_vector<int64_t>();
  std::vector<Tensor> grads;
  for (const Param& p : params) grads.push_back(p.tensor.grad());
  std::vector<Bucket> old = std::move(buckets);  // the parameters view it until they are repacked
  pack_buckets(*this, plan_size_buckets(*this, std::vector<int>(rank0.begin(), rank0.end())));
  for (Bucket& b : buckets) shard_bucket(*this, b);
  for (size_t i = 0; i < params.size(); ++i) {
    if (!grads[i].defined()) continue;
    Tensor slot = buckets[static_cast<size_t>(params[i].bucket)].grad->view(params[i].entry);
    slot.copy_(grads[i]);
    params[i].tensor.set_grad(slot);
  }
  rebuilt = true;
}

}  // namespace strata::parallel
