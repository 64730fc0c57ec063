// ZeRO-3: a unit's parameters exist in full only while the unit runs. Its forward pre-hook
// gathers them (waiting for the prefetch) and prefetches the next unit; its output passes
// through an identity autograd node whose backward gathers them again (and prefetches the
// unit before it) ahead of the unit's own backward; the forward post-hook and the completion
// of the unit's gradients free them. The root unit (parameters in no unit: embeddings, final
// LayerNorm) is gathered by the model's pre-hook and kept until the end of backward.
#include <algorithm>
#include <string>
#include <vector>

#include "parallel/data_parallel_state.h"
#include "strata/autograd/function.h"
#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/core/type_name.h"
#include "strata/tensor/factory.h"

namespace strata::parallel {

using State = DataParallelState;
namespace {

// The name of `target` in the tree under `module` ("h.0"), or "" when it is not there.
std::string module_name(const nn::Module& module, const nn::Module* target, const std::string& prefix = "") {
  for (const auto& [name, child] : module.named_children()) {
    std::string path = prefix.empty() ? name : prefix + "." + name;
    if (child.get() == target) return path;
    if (std::string found = module_name(*child, target, path); !found.empty()) return found;
  }
  return "";
}

// A parameter's bytes within its unit's storage.
struct ParamBytes {
  size_t begin = 0, end = 0;
  std::string name;
};

// Tensor::data_ptr's error for a read of a unit's released memory: which parameter was read
// (by the byte offset of the read), which module must run its hooks for it to be gathered
// and how, and where it can be read instead.
Storage::ReleasedNote released_note(std::vector<ParamBytes> params, std::string unit, std::string type) {
  return [params = std::move(params), unit = std::move(unit), type = std::move(type)](size_t byte_offset) {
    std::string what = "padding of the unit";
    for (const ParamBytes& p : params)
      if (byte_offset >= p.begin && byte_offset < p.end) what = "parameter '" + p.name + "'";
    const std::string where = unit.empty() ? "the root unit (the parameters in no unit) of the model (" + type + ")"
                                           : "unit '" + unit + "' (" + type + ")";
    const std::string fix = unit.empty()
                                ? "derive the model from nn::LanguageModel (its forward runs them), call it through "
                                  "nn::call(model, ...), or"
                                : "call the unit through nn::call(unit, ...) instead of unit.forward(...), or";
    return ::strata::detail::concat(
        what, " was released: ZeroOptimizer stage 3 shards it and gathers it only inside the forward and backward of ",
        where, ", from its forward hooks", ". If this read is in that forward, the hooks did not run: ", fix,
        " start its forward with `auto hooks = forward_hooks();` and return `hooks.output(y)`. Elsewhere, read ",
        "it through ZeroOptimizer::full_parameters() or while a ZeroOptimizer::gathered_parameters() guard lives");
  };
}

}  // namespace

void DataParallelState::install_stage3_hooks(nn::Module& root) {
  // A read of a unit's memory while it is released then names the parameter (Tensor::data_ptr).
  for (const Bucket& u : buckets) {
    const Tensor memory = u.param->data();
    const size_t elem = dtype_size(memory.dtype());
    std::vector<ParamBytes> names;
    for (int p : u.params) {
      const Param& param = params[static_cast<size_t>(p)];
      const auto& entry = u.param->entries()[param.entry];
      const auto begin = static_cast<size_t>(memory.offset() + entry.offset) * elem;
      names.push_back({begin, begin + static_cast<size_t>(entry.numel) * elem, param.name});
    }
    memory.storage()->set_released_note(released_note(std::move(names), u.unit ? module_name(root, u.unit) : "",
                                                      dynamic_type_name(u.unit ? *u.unit : root)));
  }
  std::weak_ptr<State> weak = shared_from_this();
  for (size_t i = 0; i < buckets.size(); ++i) {
    const int b = static_cast<int>(i);
    if (static_cast<int>(i) == root_bucket) continue;
    // The unit's module is reached through the tree: hooks are registered on the object itself.
    auto* unit = const_cast<nn::Module*>(buckets[i].unit);
    unit->register_forward_pre_hook([weak, b](nn::Module&) {
      if (auto s = weak.lock()) s->before_forward(b);
    });
    unit->register_forward_output_hook([weak, b](nn::Module&, const Tensor& y) {
      auto s = weak.lock();
      return s ? s->wrap_output(b, y) : y;
    });
    unit->register_forward_hook([weak, b](nn::Module&) {
      if (auto s = weak.lock()) s->after_forward(b);
    });
  }
  root.register_forward_pre_hook([weak](nn::Module&) {
    if (auto s = weak.lock()) s->root_pre_forward();
  });
  root.register_forward_output_hook([weak](nn::Module&, const Tensor& y) {
    auto s = weak.lock();
    return s && s->root_bucket >= 0 ? s->wrap_output(s->root_bucket, y) : y;
  });
  root.register_forward_hook([weak](nn::Module&) {
    if (auto s = weak.lock()) s->root_post_forward();
  });
  // The first forward prefetches in registration order (buckets hold units in reverse).
  for (int i = static_cast<int>(buckets.size()) - 1; i >= 0; --i)
    if (i != root_bucket) forward_order.push_back(i);
}

void DataParallelState::issue_gather(int b) {
  Bucket& u = buckets[static_cast<size_t>(b)];
  if (u.gathered || u.gather_work) return;
  u.param->reallocate();
  Tensor full = u.param->data();
  u.gather_work = group->all_gather(full, u.param_shard);
}

void DataParallelState::wait_gather(int b) {
  Bucket& u = buckets[static_cast<size_t>(b)];
  if (u.gathered) return;
  if (!u.gather_work) issue_gather(b);
  dist::WorkPtr work = std::move(u.gather_work);
  work->wait();
  u.gathered = true;
}

void DataParallelState::release_unit(int b) {
  Bucket& u = buckets[static_cast<size_t>(b)];
  if (pinned) return;
  if (u.gather_work) {  // a prefetch nobody used: let it land before freeing its memory
    u.gather_work->wait();
    u.gather_work.reset();
  }
  u.gathered = false;
  u.output_wrapped = false;
  if (!u.param->released()) u.param->release();
}

// The unit `step` places after (+1) or before (-1) `b` in the last forward; -1 if none.
int DataParallelState::neighbour_in_forward(int b, int step) const {
  auto it = std::find(forward_order.begin(), forward_order.end(), b);
  if (it == forward_order.end()) return -1;
  const auto pos = (it - forward_order.begin()) + step;
  if (pos < 0 || pos >= static_cast<std::ptrdiff_t>(forward_order.size())) return -1;
  return forward_order[static_cast<size_t>(pos)];
}

void DataParallelState::root_pre_forward() {
  recording.clear();
  if (root_bucket >= 0) {
    buckets[static_cast<size_t>(root_bucket)].output_wrapped = false;
    issue_gather(root_bucket);
  }
  if (options.prefetch && order_recorded && !forward_order.empty()) issue_gather(forward_order.front());
  if (root_bucket >= 0) wait_gather(root_bucket);
}

void DataParallelState::root_post_forward() {
  if (!recording.empty()) {
    forward_order = recording;
    order_recorded = true;
  }
  // Like a unit: free now when backward gathers again first (the model's forward returned
  // through HookScope::output, as GPT's does) or when no backward follows; otherwise the
  // root stays gathered until the end of backward.
  if (root_bucket >= 0) after_forward(root_bucket);
}

void DataParallelState::before_forward(int b) {
  wait_gather(b);
  recording.push_back(b);
  buckets[static_cast<size_t>(b)].output_wrapped = false;
  if (options.prefetch) {
    const int next = neighbour_in_forward(b, +1);
    if (next >= 0) issue_gather(next);
  }
}

Tensor DataParallelState::wrap_output(int b, const Tensor& y) {
  if (!grad_enabled() || !y.requires_grad()) return y;
  Tensor out = y.detach();
  std::weak_ptr<State> weak = shared_from_this();
  autograd::record("ZeroGatherBeforeBackward", {y}, {out}, {}, [weak, b](autograd::BackwardContext& ctx) {
    if (auto s = weak.lock()) s->before_backward(b);
    return std::vector<Tensor>{ctx.grad(0)};
  });
  buckets[static_cast<size_t>(b)].output_wrapped = true;
  return out;
}

void DataParallelState::after_forward(int b) {
  Bucket& u = buckets[static_cast<size_t>(b)];
  // Free now only if backward will gather again first (the output node exists) or no backward
  // follows; a unit whose forward does not return through HookScope::output() stays gathered
  // until its gradients are complete.
  if (u.output_wrapped || !grad_enabled()) release_unit(b);
}

void DataParallelState::before_backward(int b) {
  wait_gather(b);
  if (options.prefetch) {
    // Backward runs the units in reverse forward order, after the root's head.
    const int prev =
        b == root_bucket ? (forward_order.empty() ? -1 : forward_order.back()) : neighbour_in_forward(b, -1);
    if (prev >= 0) issue_gather(prev);
  }
}

// --- gathered views for users ---

ZeroOptimizer::GatheredParameters::GatheredParameters(ZeroOptimizer& zero) : zero_(zero) {
  State& s = *zero_.state_;
  if (s.options.stage != 3) return;
  STRATA_CHECK(!s.pinned, "ZeroOptimizer::gathered_parameters: already gathered (nested guards)");
  for (size_t b = 0; b < s.buckets.size(); ++b) s.issue_gather(static_cast<int>(b));
  for (size_t b = 0; b < s.buckets.size(); ++b) s.wait_gather(static_cast<int>(b));
  s.pinned = true;
}

ZeroOptimizer::GatheredParameters::~GatheredParameters() {
  State& s = *zero_.state_;
  if (s.options.stage != 3) return;
  s.pinned = false;
  for (size_t b = 0; b < s.buckets.size(); ++b) s.release_unit(static_cast<int>(b));
}

StateDict ZeroOptimizer::full_parameters() {
  NoGradGuard no_grad;
  StateDict out;
  State& s = *state_;
  const bool gather = s.options.stage == 3 && !s.pinned;
  std::unique_ptr<GatheredParameters> guard;
  if (gather) guard = std::make_unique<GatheredParameters>(*this);
  for (const State* st : states())
    for (const auto& p : st->params) out[p.name] = p.tensor.detach().clone();
  return out;
}

}  // namespace strata::parallel
