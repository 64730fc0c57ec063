// ZeroOptimizer: the data-parallel path (data_parallel_state.h) at stages 0-3 with an inner
// optimizer over this rank's shard: its parameter groups, step, clipping and loss scaling.
// Stage 3's gather / free / prefetch of units lives in zero_stage3.cpp.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <variant>

#include "optim/multi_tensor.h"
#include "parallel/data_parallel_state.h"
#include "strata/autograd/engine.h"
#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/ops/elementwise.h"
#include "strata/optim/grad_clip.h"
#include "strata/tensor/factory.h"

namespace strata::parallel {
namespace {

using State = DataParallelState;

// The groups the caller gave, mapped to parameter indices; or one group of everything.
std::vector<int> assign_groups(const std::vector<DataParallelState::Param>& params,
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

void check_options(const ZeroOptions& options) {
  STRATA_CHECK(options.stage >= 0 && options.stage <= 3, "ZeroOptimizer: stage ", options.stage,
               " is not a ZeRO stage; expected 0 (DDP), 1 (optimizer state), 2 (+ gradients) or 3 (+ parameters)");
  STRATA_CHECK(
      !options.master_dtype || *options.master_dtype == DType::Float32 || *options.master_dtype == DType::Float64,
      "ZeroOptimizer: master_dtype ", options.master_dtype.value_or(DType::Float32), " is not float32 or float64");
  STRATA_CHECK(options.bucket_cap_bytes > 0, "ZeroOptimizer: bucket_cap_bytes must be positive, got ",
               options.bucket_cap_bytes);
  STRATA_CHECK(options.replicate == nullptr || options.stage >= 1, "ZeroOptimizer: a replicate group (HSDP) needs ",
               "stage 1, 2 or 3 (stage 0 replicates everything already); got stage ", options.stage);
}

// HSDP: the shard and replicate groups meet in this rank only (a replicate group that shares
// other ranks with the shard group would count their gradients twice).
void check_replicate_group(const ZeroOptions& options, const dist::ProcessGroup& shard) {
  const dist::ProcessGroup* replicate = options.replicate;
  if (replicate == nullptr) return;
  const int me = shard.global_ranks()[static_cast<size_t>(shard.rank())];
  STRATA_CHECK(replicate->global_ranks()[static_cast<size_t>(replicate->rank())] == me, "ZeroOptimizer: replicate ",
               "group '", replicate->name(), "' does not contain this rank (world rank ", me, ") of shard group '",
               shard.name(), "'");
  for (int r : replicate->global_ranks())
    STRATA_CHECK(
        r == me || std::find(shard.global_ranks().begin(), shard.global_ranks().end(), r) == shard.global_ranks().end(),
        "ZeroOptimizer: world rank ", r, " is in both the shard group '", shard.name(), "' and the replicate group '",
        replicate->name(), "'; HSDP's replicate group holds one rank of each shard group (make_hybrid_shard_groups)");
}

// What the inner optimizer updates in bucket b, added to the parameter's group: at stage 0
// whole parameters in their shapes, otherwise the 1-D overlaps of parameters with the shard.
void add_pieces(const State& s, State::Bucket& b, std::vector<optim::ParamGroup>& inner_groups) {
  for (const FlatBuffer::Piece& pc : own_pieces(s, b)) {
    Tensor piece = b.master.narrow(0, pc.shard_offset, pc.numel);
    if (s.options.stage == 0) piece = piece.view(b.param->entries()[pc.entry].shape);
    b.pieces.push_back(std::move(piece));
    b.piece_begin.push_back(pc.shard_offset);
    b.piece_param.push_back(b.params[pc.entry]);
    const int group = s.params[static_cast<size_t>(b.params[pc.entry])].group;
    inner_groups[static_cast<size_t>(group)].params.push_back(b.pieces.back());
  }
}

// The inner optimizer's groups: the user's lr and weight decay, and this rank's pieces of
// every state.
std::vector<optim::ParamGroup> inner_groups_of(const std::vector<State*>& states,
                                               const std::vector<optim::ParamGroup>& groups) {
  std::vector<optim::ParamGroup> inner_groups(static_cast<size_t>(states.front()->num_groups));
  for (size_t g = 0; g < groups.size(); ++g) {
    inner_groups[g].lr = groups[g].lr;
    inner_groups[g].weight_decay = groups[g].weight_decay;
    inner_groups[g].initial_lr = groups[g].initial_lr;
  }
  for (State* s : states)
    for (State::Bucket& b : s->buckets) add_pieces(*s, b, inner_groups);
  return inner_groups;
}

// Experts beside ZeRO: no stage 3 (its units would mix both kinds) and no HSDP; their group
// lies inside ZeRO's and divides it. Checked before any collective.
void check_experts(const ZeroOptions& options, const dist::ProcessGroup& group) {
  if (options.experts.data == nullptr) return;
  STRATA_CHECK(options.stage <= 2, "ZeroOptimizer: expert parallelism runs beside ZeRO stages 0-2; got stage ",
               options.stage, " (stage 3 would gather units that mix experts and shared parameters)");
  STRATA_CHECK(options.replicate == nullptr, "ZeroOptimizer: expert parallelism does not run beside HSDP (a ",
               "replicate group)");
  check_expert_group(options.experts, group, "ZeroOptimizer");
}

// The trainable parameters, each once, in registration order.
std::vector<Tensor> trainable_parameters(nn::Module& module) {
  std::vector<Tensor> out;
  std::unordered_set<const TensorImpl*> seen;
  for (auto& [name, t] : module.named_parameters())
    if (t.requires_grad() && seen.insert(t.impl()).second) out.push_back(t);
  return out;
}

// ZeroOptimizer's own parameter groups (what schedulers and clipping see): the caller's, or
// one group of every trainable parameter with the options' lr and weight decay.
std::vector<optim::ParamGroup> outer_groups(nn::Module& module, const InnerOptimizer& inner,
                                            std::vector<optim::ParamGroup> groups) {
  if (!groups.empty()) {
    // Bad groups fail before any collective or any change to the module.
    std::vector<State::Param> params;
    for (auto& [name, t] : module.named_parameters()) {
      const Tensor& tensor = t;  // a structured binding: clang cannot capture it (P1091)
      if (tensor.requires_grad() && std::none_of(params.begin(), params.end(), [&](const State::Param& p) {
            return p.tensor.impl() == tensor.impl();
          }))
        params.push_back({.name = name, .tensor = tensor});
    }
    assign_groups(params, groups);
    return groups;
  }
  optim::ParamGroup all{.params = trainable_parameters(module)};
  std::visit(
      [&](const auto& o) {
        if constexpr (!std::is_same_v<std::decay_t<decltype(o)>, OptimizerFactory>) {
          all.lr = o.lr;
          all.weight_decay = o.weight_decay;
        }
      },
      inner);
  return {std::move(all)};
}

// The path of ZeRO's own state, or with `experts` the expert parameters' state.
DataParallelOptions zero_path(const ZeroOptions& options, const dist::ProcessGroup& group, bool experts = false) {
  check_options(options);
  check_replicate_group(options, group);
  check_experts(options, group);
  DataParallelOptions dp;
  dp.zero = options;
  if (experts) dp.owner = "ZeroOptimizer (expert parameters)";
  split_by_experts(dp, options.experts, experts);
  return dp;
}

}  // namespace

ZeroOptimizer::ZeroOptimizer(nn::Module& module, const InnerOptimizer& inner, dist::ProcessGroup& group,
                             const ZeroOptions& options, const std::vector<optim::ParamGroup>& groups)
    : optim::Optimizer(outer_groups(module, inner, groups), /*check_parameters=*/false),
      module_(module),
      group_(group),
      state_(make_data_parallel_state(module, group, zero_path(options, group))) {
  State& s = *state_;
  if (options.experts.data != nullptr) start_experts(options);
  std::vector<State::Param> every;
  for (State* st : states()) every.insert(every.end(), st->params.begin(), st->params.end());
  const std::vector<int> param_group = assign_groups(every, groups);
  size_t next = 0;
  for (State* st : states()) {
    for (State::Param& p : st->params) p.group = param_group[next++];
    st->num_groups = groups.empty() ? 1 : static_cast<int>(groups.size());
  }
  NoGradGuard no_grad;
  std::vector<optim::ParamGroup> inner_groups = inner_groups_of(states(), groups);
  s.inner = make_inner(inner, std::move(inner_groups), !groups.empty());
  STRATA_CHECK(s.options.stage == 0 || s.inner->is_elementwise(), "ZeroOptimizer: stage ", s.options.stage,
               " shards the optimizer state, which needs an optimizer whose update is elementwise "
               "(Optimizer::is_elementwise(): SGD, Adam, AdamW); the optimizer given is not. Use stage 0 for it");
  pull_hyperparameters();
}

// The expert parameters' state (collective over options.experts.data), led by state_.
void ZeroOptimizer::start_experts(const ZeroOptions& options) {
  experts_ = make_expert_state(module_, state_, zero_path(options, group_, true), expert_scaling_);
}

ZeroOptimizer::~ZeroOptimizer() {
  for (GradHookHandle& h : expert_scaling_) h.remove();
}

std::vector<DataParallelState*> ZeroOptimizer::states() const {
  if (experts_) return {state_.get(), experts_.get()};
  return {state_.get()};
}

// The lr and weight decay live in this optimizer's groups (schedulers scale them); the inner
// optimizer takes them at each step.
void ZeroOptimizer::push_hyperparameters() const {
  auto& inner = state_->inner->param_groups();
  for (size_t g = 0; g < inner.size() && g < groups_.size(); ++g) {
    inner[g].lr = groups_[g].lr;
    inner[g].weight_decay = groups_[g].weight_decay;
  }
}

void ZeroOptimizer::pull_hyperparameters() {
  const auto& inner = state_->inner->param_groups();
  for (size_t g = 0; g < inner.size() && g < groups_.size(); ++g) {
    groups_[g].lr = inner[g].lr;
    groups_[g].weight_decay = inner[g].weight_decay;
    groups_[g].initial_lr = inner[g].initial_lr;
  }
  step_count_ = state_->inner->step_count();
}

bool ZeroOptimizer::is_elementwise() const { return state_->inner->is_elementwise(); }

StateDict ZeroOptimizer::state_dict() const {
  push_hyperparameters();
  return state_->inner->state_dict();
}

void ZeroOptimizer::load_state_dict(const StateDict& state) {
  state_->inner->load_state_dict(state);
  pull_hyperparameters();
}

// --- the public API ---

void ZeroOptimizer::sync_gradients() {
  State& s = *state_;
  STRATA_CHECK(!autograd::in_backward(), "ZeroOptimizer::sync_gradients: called during backward");
  STRATA_CHECK(!s.no_sync, "ZeroOptimizer::sync_gradients: called inside no_sync()");
  STRATA_CHECK(!(s.options.stage == 1 && s.reduced_in_place),
               "ZeroOptimizer::sync_gradients: the gradients were "
               "reduced already since the last zero_grad() (stage 1 reduces the buckets in place)");
  s.finalize_all();
}

Tensor ZeroOptimizer::local_gradient(const std::string& name) {
  STRATA_CHECK(state_->options.stage <= 2, "ZeroOptimizer::local_gradient: stage ", state_->options.stage,
               " keeps no full gradient of '", name, "' (stages 0-2 do)");
  const auto named = [&](const State::Param& p) { return p.name == name; };
  State* holder = state_.get();
  if (experts_ && std::none_of(holder->params.begin(), holder->params.end(), named)) holder = experts_.get();
  State& s = *holder;
  auto it = std::find_if(s.params.begin(), s.params.end(), named);
  STRATA_CHECK(it != s.params.end(), "ZeroOptimizer::local_gradient: no parameter named '", name, "'");
  NoGradGuard no_grad;
  State::Bucket& b = s.buckets[static_cast<size_t>(it->bucket)];
  if (s.options.stage <= 1) {
    s.gradient_into_bucket(*it, b);  // the bucket slot holds the sum from now on
  } else {
    ensure_full_gradient(*b.grad, s.device);
    b.local_sums = true;
  }
  s.unsynced = true;
  return b.grad->view(it->entry);
}

ZeroOptimizer::NoSyncGuard::NoSyncGuard(ZeroOptimizer& zero) : zero_(zero), previous_(zero.state_->no_sync) {
  STRATA_CHECK(!autograd::in_backward(), "ZeroOptimizer::no_sync: called during backward");
  for (State* s : zero_.states()) s->no_sync = true;
}
ZeroOptimizer::NoSyncGuard::~NoSyncGuard() {
  for (State* s : zero_.states()) s->no_sync = previous_;
}

void ZeroOptimizer::zero_grad(bool set_to_none) {
  STRATA_CHECK(!autograd::in_backward(), "ZeroOptimizer::zero_grad: called during backward");
  for (State* s : states()) s->zero_gradients(set_to_none);
}

void ZeroOptimizer::step() {
  NoGradGuard no_grad;
  STRATA_CHECK(!autograd::in_backward(), "ZeroOptimizer::step: called during backward");
  for (State* s : states()) {
    STRATA_CHECK(!s->unsynced,
                 "ZeroOptimizer::step: the gradients of backward passes under no_sync() are not reduced "
                 "yet; run one synchronised backward (outside no_sync()) before step()");
    if (!s->grads_prepared) s->prepare_master_grads();
  }
  push_hyperparameters();
  state_->inner->step();
  step_count_ = state_->inner->step_count();
  std::vector<dist::WorkPtr> works;
  for (State* s : states()) {
    for (State::Bucket& b : s->buckets) {
      if (b.master_separate) b.param_shard.copy_(b.master);
      if (s->options.stage == 1 || s->options.stage == 2) {
        Tensor full = b.param->data();
        works.push_back(s->group->all_gather(full, b.param_shard));
      }
    }
  }
  for (auto& w : works) w->wait();
  // Every parameter changed, though stage 1-2's gather writes raw and stage 3's memory may be
  // released: a graph that saved one before this step must refuse its backward.
  for (State* s : states()) {
    for (State::Bucket& b : s->buckets) b.param->data().bump_version();
    s->drop_master_grads();
  }
}

bool ZeroOptimizer::unscale_gradients(double factor) {
  State& s = *state_;
  std::vector<Tensor> shards;
  for (State* st : states()) {
    STRATA_CHECK(!st->unsynced,
                 "ZeroOptimizer::unscale_gradients: the gradients of backward passes under no_sync() are "
                 "not reduced yet; run one synchronised backward (outside no_sync()) first");
    if (!st->grads_prepared) st->prepare_master_grads();
    for (State::Bucket& b : st->buckets) shards.push_back(b.master_grad);
  }
  double found = optim::multi_tensor::unscale_and_check(shards, factor) ? 1.0 : 0.0;
  // A shard is one rank's, an expert one ep rank's: only its owner may see the inf. Agree on
  // it (max of 0/1).
  const bool over_group = s.options.stage >= 1 || experts_ != nullptr;
  for (dist::ProcessGroup* g :
       {over_group ? s.group : nullptr, s.options.tensor_parallel.group, s.options.pipeline_parallel.group}) {
    if (g == nullptr || g->size() == 1) continue;
    Tensor t = full({1}, found, {.dtype = DType::Float64, .device = g->tensor_device()});
    g->all_reduce(t, dist::ReduceOp::Max)->wait();
    found = t.item();
  }
  return found != 0.0;
}

namespace {

// Squares of this rank's pieces of `s` in multi_tensor's fixed order (the same bits on either
// device and any thread count): {split, replicated} when tensor parallelism runs beside
// ZeRO, pipeline stages' duplicate copies left out. One pass per kind, not one per piece (on
// a GPU each pass returns its sum to the host).
std::pair<double, double> squares_of(const State& s) {
  const ZeroOptions::TensorParallel& tp = s.options.tensor_parallel;
  const ZeroOptions::PipelineParallel& pp = s.options.pipeline_parallel;
  std::vector<Tensor> split_parts, replicated_parts;
  for (const State::Bucket& b : s.buckets) {
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
  return {optim::multi_tensor::sum_of_squares(split_parts), optim::multi_tensor::sum_of_squares(replicated_parts)};
}

// Sums over a group, made on its own device (NCCL takes CUDA tensors only).
std::vector<double> group_sum(dist::ProcessGroup& g, const std::vector<double>& values) {
  Tensor t = from_vector(values, {static_cast<int64_t>(values.size())}).to(g.tensor_device());
  g.all_reduce(t, dist::ReduceOp::Sum)->wait();
  return t.to_vector<double>();
}

}  // namespace

double ZeroOptimizer::clip_grad_norm(double max_norm, const optim::ClipOptions& options) {
  NoGradGuard no_grad;
  State& s = *state_;
  STRATA_CHECK(std::isfinite(max_norm) && max_norm > 0, "ZeroOptimizer::clip_grad_norm: max_norm ", max_norm,
               " must be finite and > 0");
  for (State* st : states()) {
    STRATA_CHECK(!st->unsynced,
                 "ZeroOptimizer::clip_grad_norm: the gradients of backward passes under no_sync() are "
                 "not reduced yet; run one synchronised backward (outside no_sync()) first");
    if (!st->grads_prepared) st->prepare_master_grads();
  }
  // Split and replicated squares summed over ZeRO's group (stages 1-3: each rank holds a
  // shard), then the split part over the tensor-parallel group (a replicated parameter is the
  // same on every TP rank: once). Experts: ZeRO's group holds every ep rank's experts, each
  // sharded over the expert-data group (stages 1-2) or whole on each of its ranks (stage 0:
  // its first rank counts them), so one sum over ZeRO's group counts each once.
  auto [split, replicated] = squares_of(s);
  const bool sum_shared = s.options.stage >= 1 && s.world > 1;
  if (experts_) {
    auto [expert_split, expert_replicated] = squares_of(*experts_);
    if (s.options.stage == 0 && experts_->rank != 0) expert_split = expert_replicated = 0.0;
    const std::vector<double> sums =
        group_sum(*s.group, {sum_shared ? split : 0.0, sum_shared ? replicated : 0.0, expert_split, expert_replicated});
    split = (sum_shared ? sums[0] : split) + sums[2];
    replicated = (sum_shared ? sums[1] : replicated) + sums[3];
  } else if (sum_shared) {
    const std::vector<double> sums = group_sum(*s.group, {split, replicated});
    split = sums[0];
    replicated = sums[1];
  }
  const ZeroOptions::TensorParallel& tp = s.options.tensor_parallel;
  const ZeroOptions::PipelineParallel& pp = s.options.pipeline_parallel;
  if (tp.group != nullptr && tp.group->size() > 1) split = group_sum(*tp.group, {split})[0];
  double sum = split + replicated;
  if (pp.group != nullptr && pp.group->size() > 1) sum = group_sum(*pp.group, {sum})[0];  // every stage's squares
  const double norm = std::sqrt(sum);
  optim::check_total_norm(norm, options, "ZeroOptimizer::clip_grad_norm");  // the same norm on every rank
  if (!std::isfinite(norm)) return norm;
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0)
    for (State* st : states())
      for (State::Bucket& b : st->buckets) mul_(b.master_grad, coef);
  return norm;
}

optim::Optimizer& ZeroOptimizer::optimizer() { return *state_->inner; }
int ZeroOptimizer::stage() const { return state_->options.stage; }
const ZeroOptions& ZeroOptimizer::options() const { return state_->options; }

ZeroMemory ZeroOptimizer::memory() const {
  ZeroMemory m;
  for (const State* s : states())
    for (const State::Bucket& b : s->buckets) {
      m.parameters += static_cast<int64_t>(s->options.stage == 3 ? b.param_shard.nbytes() : b.param->nbytes());
      m.gradients += static_cast<int64_t>(s->options.stage <= 1 ? b.grad->nbytes() : b.grad_shard.nbytes());
      if (b.master_separate) m.master += static_cast<int64_t>(b.master.nbytes());
      m.padding_elements += b.param->padding();
    }
  for (const auto& [key, t] : state_->inner->state_dict())
    if (key.rfind("state.", 0) == 0) m.optimizer_state += static_cast<int64_t>(t.nbytes());
  return m;
}

std::vector<std::vector<std::string>> ZeroOptimizer::bucket_parameter_names() const {
  std::vector<std::vector<std::string>> out;
  for (const State* s : states())
    for (const auto& b : s->buckets) {
      out.emplace_back();
      for (int i : b.params) out.back().push_back(s->params[static_cast<size_t>(i)].name);
    }
  return out;
}

std::vector<int64_t> ZeroOptimizer::bucket_bytes() const {
  std::vector<int64_t> out;
  for (const State* s : states())
    for (const auto& b : s->buckets) out.push_back(static_cast<int64_t>(b.param->nbytes()));
  return out;
}

}  // namespace strata::parallel
