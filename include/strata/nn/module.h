#pragma once
#include <concepts>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "strata/nn/param_init.h"
#include "strata/tensor/state_dict.h"
#include "strata/tensor/tensor.h"

namespace strata::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// A tree of parameters, buffers and child modules with hierarchical names
// ("h.0.attn.c_attn.weight"), like torch.nn.Module. Forward functions are ordinary member
// functions with whatever signature fits the module.
class Module {
 public:
  using ForwardHook = std::function<void(Module&)>;
  // Sees a forward's output and returns the tensor the forward returns instead (e.g. the
  // output passed through an identity autograd node whose backward runs first, before any of
  // the module's own backward: ZeRO-3 gathers the module's parameters there).
  using ForwardOutputHook = std::function<Tensor(Module&, const Tensor&)>;

  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Recursive, in registration order: own entries first, then each child's.
  NamedTensors named_parameters() const;
  std::vector<Tensor> parameters() const;
  NamedTensors named_buffers() const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  int64_t num_parameters() const;

  // This module ("") and every module below it with its dotted path ("h.0.attn"), parents
  // before children, in registration order. A module registered twice is listed once,
  // under its first path. The pointers are valid while this module lives.
  std::vector<std::pair<std::string, Module*>> named_modules();
  std::vector<Module*> modules();
  // Calls fn on every module below this one and then on this one: children before their
  // parent (a child's own children first), in registration order, each module once
  // (torch.nn.Module.apply's order). For initialisers: `model.apply(init_weights)`.
  void apply(const std::function<void(Module&)>& fn);

  // Converts every parameter and every floating buffer to `dtype` in place: each tensor
  // keeps its identity (the TensorImpl every handle shares: the module's members, tied
  // weights), so optimizers built afterwards see the new tensors. Gradients are converted
  // too. Build optimizers after to(): one built before keeps its state (moments) in the old
  // dtype. Refused, changing nothing, for parameters already wrapped by DDP or ZeRO (they
  // have post-accumulate hooks) and for a non-floating dtype. Graphs recorded before to()
  // must not be backpropagated after it.
  void to(DType dtype);
  // Moves every parameter and buffer (and gradient) to `device` the same way, dtypes kept:
  // `model.to(Device::cuda(0))`, then build the optimizer. The models create what their
  // forward needs (positions, rotary tables) on their input's device.
  void to(Device device);

  // Sets the mode of this module and of every module below it; read with is_training().
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Parameters and buffers by name (detached: saving must not keep the graph alive).
  StateDict state_dict() const;
  // Copies values in place, so tensors held elsewhere (optimizers) stay valid. With strict,
  // missing or unexpected names are errors; shapes and dtypes must always match.
  void load_state_dict(const StateDict& state, bool strict = true);
  void zero_grad(bool set_to_none = true);

  // Draws every parameter registered with a recipe (register_parameter's third argument)
  // from named_stream(seed, its full name below this module): the values depend on the seed
  // and the names only, not on which other parameters this process builds or in which order.
  // Models built with InitOptions::by_name (GPT, Llama) run it from their base constructor.
  void init_parameters(uint64_t seed);

  // Called around forward by modules that run them (ZeRO-3 gathers parameters here).
  void register_forward_pre_hook(ForwardHook hook) { pre_hooks_.push_back(std::move(hook)); }
  void register_forward_hook(ForwardHook hook) { post_hooks_.push_back(std::move(hook)); }
  // Run by modules whose forward returns through HookScope::output() (nn::Block does).
  void register_forward_output_hook(ForwardOutputHook hook) { output_hooks_.push_back(std::move(hook)); }
  // Whether any hook is registered on this module itself (not below it).
  bool has_forward_hooks() const { return !pre_hooks_.empty() || !post_hooks_.empty() || !output_hooks_.empty(); }

  // Runs `forward()` (a callable returning this module's forward output) with the hooks
  // around it: pre-hooks, the output hooks on its result, then the forward hooks. nn::call
  // (below) is the usual way in. Hooks run once per call however the scopes nest: a forward
  // that opens forward_hooks() itself and is called through here runs them only here.
  template <class Forward>
  Tensor call_with_hooks(Forward&& forward) {
    HookScope hooks(*this);
    return hooks.output(std::forward<Forward>(forward)());
  }

 protected:
  // Registers a parameter (marked requires_grad) and returns the handle to keep as a member.
  // With a recipe, init_parameters draws its values later (from its full name).
  Tensor register_parameter(std::string name, Tensor value, std::optional<ParamRecipe> recipe = std::nullopt);
  Tensor register_buffer(std::string name, Tensor value);
  template <class M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> module) {
    check_new_name(name);
    children_.emplace_back(std::move(name), module);
    return module;
  }

  // RAII: runs the pre-hooks now and the forward hooks when it goes out of scope (nothing
  // when it opens inside another scope of the same module: only the outermost runs them).
  class HookScope {
   public:
    explicit HookScope(Module& m);
    ~HookScope() noexcept(false);
    HookScope(const HookScope&) = delete;
    HookScope& operator=(const HookScope&) = delete;
    // Runs the output hooks on the forward's result: `return hooks.output(y);`.
    Tensor output(Tensor y);

   private:
    Module& module_;
    bool outermost_;
  };
  HookScope forward_hooks() { return HookScope(*this); }

  // The registered children in order, for containers that index them without a copy.
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& child_entries() const { return children_; }

 private:
  void check_new_name(const std::string& name) const;
  void collect(const std::string& prefix, bool buffers, NamedTensors& out) const;
  void init_below(const std::string& prefix, uint64_t seed);

  NamedTensors params_;
  NamedTensors buffers_;
  std::map<std::string, ParamRecipe> recipes_;  // by local parameter name
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  std::vector<ForwardHook> pre_hooks_;
  std::vector<ForwardHook> post_hooks_;
  std::vector<ForwardOutputHook> output_hooks_;
  int open_hook_scopes_ = 0;  // HookScopes of this module now open (nested calls run hooks once)
  bool training_ = true;
};

// Calls `module.forward(args...)` inside the module's hooks, as calling a torch.nn.Module
// does: `Tensor y = nn::call(*expert, x);`. A module called this way needs no hook code of
// its own to be a ZeRO-3 unit (its parameters are gathered before its forward and again
// before its backward, and freed after each). Calling forward() directly skips the hooks
// unless forward opens forward_hooks() itself, as the library's layers do.
template <class M, class... Args>
requires std::derived_from<M, Module> Tensor call(M& module, Args&&... args) {
  return module.call_with_hooks([&]() -> Tensor { return module.forward(std::forward<Args>(args)...); });
}

}  // namespace strata::nn
