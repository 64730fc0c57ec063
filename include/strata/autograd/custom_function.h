#pragma once
// Custom differentiable ops as a class with a hand-written backward (libtorch's
// torch::autograd::Function shape). For one-off ops inside the library, autograd::record
// (function.h) with a lambda stays the shorter form.
//
//   struct ScaledTanh : autograd::Function<ScaledTanh> {
//     static Tensor forward(autograd::AutogradContext* ctx, const Tensor& x, double scale) {
//       Tensor y = mul(tanh(x), scale);
//       ctx->save_for_backward({y});
//       ctx->saved_data["scale"] = scale;
//       return y;
//     }
//     static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> grads) {
//       Tensor y = ctx->get_saved_variables()[0];
//       double s = std::get<double>(ctx->saved_data["scale"]);
//       // d/dx s tanh(x) = s (1 - tanh^2) = s - y^2 / s
//       return {mul(grads[0], add(mul(mul(y, y), -1.0 / s), s)), Tensor()};  // one per argument
//     }
//   };
//   Tensor y = ScaledTanh::apply(x, 2.0);
//
// forward runs with grad mode off, takes any arguments (Tensor arguments are the op's
// inputs) and returns a Tensor or a std::vector<Tensor> (several outputs). backward gets
// one gradient per output (zeros for an output that received none or was marked
// non-differentiable) and returns one per forward argument, in order: undefined for
// non-Tensor arguments and for inputs with !ctx->needs_input_grad(i) (ignored if given).
// Not supported: double backward (saved tensors come back detached, and backward runs with
// grad mode off), Tensor arguments inside containers (pass them as separate arguments).
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <variant>
#include <vector>

#include "strata/autograd/grad_mode.h"
#include "strata/tensor/tensor.h"

namespace strata::autograd {

// A non-tensor value kept for backward (sizes, flags, scales).
using SavedValue = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>>;

// What forward hands to backward. Made by Function::apply, one per call; freed with the
// graph node (after backward unless retain_graph).
class AutogradContext {
 public:
  explicit AutogradContext(std::vector<bool> needs_input_grad) : needs_input_grad_(std::move(needs_input_grad)) {}

  // Tensors backward needs (inputs or outputs), kept as detached handles: an output saved
  // here does not keep its own node alive. Their versions are noted now: backward refuses to
  // run if one is written in place later (as torch's saved tensors).
  void save_for_backward(const std::vector<Tensor>& tensors);
  const std::vector<Tensor>& get_saved_variables() const { return saved_; }
  // Each saved tensor's version at save_for_backward (0 for undefined ones), for the node.
  const std::vector<uint64_t>& saved_versions() const { return saved_versions_; }
  std::map<std::string, SavedValue> saved_data;

  // Whether forward argument i (0 = the first after ctx) is a tensor that needs a gradient.
  bool needs_input_grad(size_t i) const { return i < needs_input_grad_.size() && needs_input_grad_[i]; }
  // Outputs (as returned by forward) that get no gradient and do not require grad (indices,
  // masks). Integer outputs are always non-differentiable.
  void mark_non_differentiable(const std::vector<Tensor>& outputs);
  bool is_non_differentiable(const Tensor& output) const;

 private:
  std::vector<Tensor> saved_;
  std::vector<uint64_t> saved_versions_;
  std::vector<bool> needs_input_grad_;
  std::vector<std::weak_ptr<TensorImpl>> non_differentiable_;  // weak: never keeps an output alive
};

using CustomBackward = std::function<std::vector<Tensor>(AutogradContext*, std::vector<Tensor>)>;

namespace detail {
inline Tensor as_input(const Tensor& t) { return t; }
template <class T>
Tensor as_input(const T&) {
  return Tensor();  // a non-tensor argument: no gradient edge
}
std::vector<bool> needs_input_grad_of(const std::vector<Tensor>& inputs);
// Records the node of one Function::apply call (when an input needs grad) and returns the
// outputs the caller sees.
std::vector<Tensor> finish_function(const std::type_info& type, std::shared_ptr<AutogradContext> ctx,
                                    const std::vector<Tensor>& inputs, std::vector<Tensor> outputs,
                                    CustomBackward backward);
}  // namespace detail

template <class Derived>
struct Function {
  template <class... Args>
  static auto apply(Args&&... args) {
    std::vector<Tensor> inputs{detail::as_input(args)...};
    auto ctx = std::make_shared<AutogradContext>(detail::needs_input_grad_of(inputs));
    using Out = decltype(Derived::forward(ctx.get(), std::forward<Args>(args)...));
    static_assert(std::is_same_v<Out, Tensor> || std::is_same_v<Out, std::vector<Tensor>>,
                  "Function: forward must return Tensor or std::vector<Tensor>");
    std::vector<Tensor> outputs;
    {
      NoGradGuard no_grad;  // forward's own ops are not recorded: backward replaces them
      if constexpr (std::is_same_v<Out, Tensor>) {
        outputs.push_back(Derived::forward(ctx.get(), std::forward<Args>(args)...));
      } else {
        outputs = Derived::forward(ctx.get(), std::forward<Args>(args)...);
      }
    }
    outputs = detail::finish_function(typeid(Derived), std::move(ctx), inputs, std::move(outputs), &Derived::backward);
    if constexpr (std::is_same_v<Out, Tensor>) {
      return outputs[0];
    } else {
      return outputs;
    }
  }
};

}  // namespace strata::autograd
