#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "strata/tensor/tensor.h"

namespace strata {

class Node;

// Where a gradient goes: output `input_nr` of `node` (null node: no gradient needed).
struct Edge {
  std::shared_ptr<Node> node;
  uint32_t input_nr = 0;
};

// What the engine needs to know of a forward output without keeping it alive.
struct TensorMeta {
  Shape shape;
  DType dtype = DType::Float32;
  Device device;
};

// The gradient hooks of one tensor (Tensor::register_hook), run in registration order.
struct GradHookList {
  using Hook = std::function<Tensor(const Tensor& grad)>;
  std::vector<std::pair<uint64_t, Hook>> hooks;
  uint64_t next_id = 1;  // never reused, so a stale handle cannot remove a newer hook
  uint64_t add(Hook hook);
  // Passes `grad` through every hook; a replacement must keep `meta`'s shape and dtype
  // (`where` names the tensor in the error).
  Tensor run(Tensor grad, const TensorMeta& meta, std::string_view where) const;
};

// One recorded operation. apply() maps the gradients of its forward outputs to the
// gradients of its forward inputs, in next_edges() order.
class Node {
 public:
  Node();
  // Tears down the chain of nodes it solely owns iteratively: a 10,000-op graph must not
  // recurse 10,000 destructors deep.
  virtual ~Node();
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) = 0;
  virtual std::string_view name() const = 0;
  // Drops saved tensors after backward (unless retain_graph); a later apply() must fail.
  virtual void release() {}

  const std::vector<Edge>& next_edges() const { return next_edges_; }
  std::vector<Edge>& mutable_next_edges() { return next_edges_; }
  const std::vector<TensorMeta>& output_meta() const { return output_meta_; }
  std::vector<TensorMeta>& mutable_output_meta() { return output_meta_; }
  // Creation order; the engine runs later nodes first, like PyTorch.
  uint64_t sequence_nr() const { return sequence_nr_; }
  // Hooks on the gradient of forward output `slot`, run before apply() (created on demand).
  std::shared_ptr<GradHookList> output_grad_hooks(uint32_t slot);
  // Runs those hooks on the defined gradients the engine is about to pass to apply().
  void run_output_grad_hooks(std::vector<Tensor>& grad_outputs) const;

 protected:
  std::vector<Edge> next_edges_;
  std::vector<TensorMeta> output_meta_;
  uint64_t sequence_nr_;
  std::vector<std::shared_ptr<GradHookList>> output_grad_hooks_;  // by output slot
};

// Per-tensor autograd state.
struct AutogradMeta {
  bool requires_grad = false;
  std::shared_ptr<Node> grad_fn;         // null for leaves
  uint32_t output_nr = 0;                // which output of grad_fn this tensor is
  Tensor grad;                           // accumulated gradient (leaves)
  std::weak_ptr<Node> grad_accumulator;  // the AccumulateGrad node of a leaf
  std::vector<std::function<void(Tensor&)>> post_accumulate_hooks;
  std::shared_ptr<GradHookList> grad_hooks;  // a leaf's Tensor::register_hook hooks
};

namespace autograd {
// The edge a gradient for `t` must flow into (creates a leaf's AccumulateGrad on demand).
Edge gradient_edge(const Tensor& t);
}  // namespace autograd

}  // namespace strata
