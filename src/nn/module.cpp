#include "strata/nn/module.h"

#include <set>

#include "strata/autograd/grad_mode.h"

namespace strata::nn {

Tensor Module::register_parameter(std::string name, Tensor value, std::optional<ParamRecipe> recipe) {
  check_new_name(name);
  STRATA_CHECK(value.defined(), "register_parameter: parameter '", name, "' is undefined");
  value.set_requires_grad(true);
  if (recipe) recipes_[name] = std::move(*recipe);
  params_.emplace_back(std::move(name), value);
  return value;
}

Tensor Module::register_buffer(std::string name, Tensor value) {
  check_new_name(name);
  buffers_.emplace_back(std::move(name), value);
  return value;
}

void Module::check_new_name(const std::string& name) const {
  STRATA_CHECK(!name.empty() && name.find('.') == std::string::npos, "Module: invalid name '", name,
               "' (must be non-empty, without '.')");
  auto taken = [&](const auto& list) {
    for (const auto& [n, _] : list)
      if (n == name) return true;
    return false;
  };
  STRATA_CHECK(!taken(params_) && !taken(buffers_) && !taken(children_), "Module: name '", name,
               "' is already registered");
}

void Module::collect(const std::string& prefix, bool buffers, NamedTensors& out) const {
  for (const auto& [name, t] : buffers ? buffers_ : params_) out.emplace_back(prefix + name, t);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", buffers, out);
}

NamedTensors Module::named_parameters() const {
  NamedTensors out;
  collect("", false, out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [_, t] : named_parameters()) out.push_back(t);
  return out;
}

NamedTensors Module::named_buffers() const {
  NamedTensors out;
  collect("", true, out);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const { return children_; }

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (auto& [_, t] : named_parameters()) n += t.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [_, child] : children_) child->train(on);
}

StateDict Module::state_dict() const {
  StateDict out;
  for (auto& [name, t] : named_parameters()) out[name] = t.detach();
  for (auto& [name, t] : named_buffers()) out[name] = t.detach();
  return out;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  NamedTensors mine = named_parameters();
  NamedTensors bufs = named_buffers();
  mine.insert(mine.end(), bufs.begin(), bufs.end());
  std::set<std::string> used;
  NoGradGuard no_grad;
  for (auto& [name, t] : mine) {
    auto it = state.find(name);
    if (it == state.end()) {
      STRATA_CHECK(!strict, "load_state_dict: missing entry '", name, "' (shape ", t.shape(), ")");
      continue;
    }
    const Tensor& src = it->second;
    STRATA_CHECK(src.shape() == t.shape(), "load_state_dict: '", name, "' has shape ", src.shape(),
                 " in the state dict but ", t.shape(), " in the module");
    STRATA_CHECK(src.dtype() == t.dtype(), "load_state_dict: '", name, "' has dtype ", src.dtype(),
                 " in the state dict but ", t.dtype(), " in the module");
    Tensor dst = t;
    dst.copy_(src);
    used.insert(name);
  }
  if (strict) {
    for (auto& [name, _] : state)
      STRATA_CHECK(used.count(name), "load_state_dict: unexpected entry '", name, "' not in the module");
  }
}

void Module::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (auto& [_, p] : named_parameters()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (set_to_none) {
      p.set_grad(Tensor());
    } else {
      g.zero_();
    }
  }
}

void Module::init_parameters(uint64_t seed) { init_below("", seed); }

void Module::init_below(const std::string& prefix, uint64_t seed) {
  for (auto& [name, t] : params_) {
    auto it = recipes_.find(name);
    if (it == recipes_.end()) continue;
    const ParamRecipe& r = it->second;
    fill_init(t, r.init, named_stream(seed, prefix + name), r.part ? &*r.part : nullptr);
  }
  for (auto& [name, child] : children_) child->init_below(prefix + name + ".", seed);
}

Module::HookScope::HookScope(Module& m) : module_(m), outermost_(m.open_hook_scopes_ == 0) {
  if (outermost_)
    for (auto& hook : module_.pre_hooks_) hook(module_);
  ++module_.open_hook_scopes_;  // after the hooks: a throwing pre-hook leaves no scope open
}

Tensor Module::HookScope::output(Tensor y) {
  if (!outermost_) return y;
  for (auto& hook : module_.output_hooks_) y = hook(module_, y);
  return y;
}

Module::HookScope::~HookScope() noexcept(false) {
  --module_.open_hook_scopes_;
  if (!outermost_ || std::uncaught_exceptions() > 0) return;  // forward failed: don't run hooks on top
  for (auto& hook : module_.post_hooks_) hook(module_);
}

}  // namespace strata::nn
