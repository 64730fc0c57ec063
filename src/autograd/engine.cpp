#include "strata/autograd/engine.h"

#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "autograd/accumulate_grad.h"
#include "autograd/anomaly_check.h"
#include "strata/autograd/anomaly_mode.h"
#include "strata/autograd/grad_mode.h"
#include "strata/autograd/node.h"
#include "strata/profiler/profiler.h"
#include "strata/tensor/factory.h"

namespace strata::autograd {
namespace {

struct PassState {
  std::vector<std::function<void()>> final_callbacks;
};
thread_local PassState* t_pass = nullptr;

struct LaterFirst {
  bool operator()(const std::shared_ptr<Node>& a, const std::shared_ptr<Node>& b) const {
    return a->sequence_nr() < b->sequence_nr();
  }
};

void check_gradient(const Tensor& g, const Node& target, uint32_t slot, std::string_view producer) {
  const TensorMeta& meta = target.output_meta().at(slot);
  STRATA_CHECK(g.shape() == meta.shape, "backward: ", producer, " produced a gradient of shape ", g.shape(),
               " for a tensor of shape ", meta.shape, " (output ", slot, " of ", target.name(), ")");
  STRATA_CHECK(g.dtype() == meta.dtype, "backward: ", producer, " produced a ", g.dtype(), " gradient for a ",
               meta.dtype, " tensor (output ", slot, " of ", target.name(), ")");
}

}  // namespace

bool in_backward() { return t_pass != nullptr; }

void queue_final_callback(std::function<void()> callback) {
  STRATA_CHECK(t_pass != nullptr, "queue_final_callback: no backward pass is running on this thread");
  t_pass->final_callbacks.push_back(std::move(callback));
}

namespace {

// The gradients waiting for each node, one slot per node output, summed as they arrive.
class GradientBuffers {
 public:
  void add(const Edge& edge, Tensor g) {
    std::vector<Tensor>& buf = buffers_[edge.node.get()];
    if (buf.empty()) buf.resize(edge.node->output_meta().size());
    Tensor& slot = buf[edge.input_nr];
    if (!slot.defined()) {
      slot = std::move(g);
    } else if (slot.impl_ptr().use_count() == 1 && slot.storage().use_count() == 1 && slot.is_contiguous() &&
               g.shape() == slot.shape()) {
      accumulate_gradient_(slot, g);  // the buffer owns the only reference: sum in place
    } else {
      slot = sum_gradients(slot, g);
    }
  }

  // The node's gradients (empty when none arrived), leaving the buffers.
  std::vector<Tensor> take(Node* node) {
    std::vector<Tensor> inputs;
    if (auto it = buffers_.find(node); it != buffers_.end()) {
      inputs = std::move(it->second);
      buffers_.erase(it);
    }
    return inputs;
  }

 private:
  std::unordered_map<Node*, std::vector<Tensor>> buffers_;
};

// Checks the roots and their gradients (implied ones for one-element roots), puts them in the
// buffers and returns the roots' nodes.
std::vector<std::shared_ptr<Node>> seed_roots(std::span<const Tensor> roots, std::span<const Tensor> grads,
                                              GradientBuffers& buffers) {
  STRATA_CHECK(!roots.empty(), "backward: no tensors given");
  STRATA_CHECK(grads.empty() || grads.size() == roots.size(), "backward: ", roots.size(), " tensors but ", grads.size(),
               " gradients");
  std::vector<std::shared_ptr<Node>> root_nodes;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& root = roots[i];
    STRATA_CHECK(root.defined(), "backward: tensor ", i, " is undefined");
    STRATA_CHECK(root.requires_grad(), "backward: tensor ", i, " of shape ", root.shape(),
                 " does not require grad and has no grad_fn");
    Tensor g = grads.empty() ? Tensor() : grads[i];
    if (!g.defined()) {
      STRATA_CHECK(root.numel() == 1, "backward: a gradient can be implied only for one-element outputs; tensor ", i,
                   " has shape ", root.shape(), ", pass its gradient explicitly");
      g = ones_like(root);
    }
    STRATA_CHECK(g.shape() == root.shape(), "backward: gradient of shape ", g.shape(), " given for tensor ", i,
                 " of shape ", root.shape());
    STRATA_CHECK(g.dtype() == root.dtype(), "backward: ", g.dtype(), " gradient given for ", root.dtype(), " tensor ",
                 i);
    Edge edge = gradient_edge(root);
    buffers.add(edge, g);
    root_nodes.push_back(edge.node);
  }
  return root_nodes;
}

// For every node reachable from the roots, how many edges point at it. Iterative so that
// graph depth never touches the C++ stack.
std::unordered_map<Node*, int> count_dependencies(const std::vector<std::shared_ptr<Node>>& root_nodes) {
  std::unordered_map<Node*, int> dependencies;
  std::unordered_set<Node*> seen;
  std::vector<Node*> stack;
  for (const auto& n : root_nodes)
    if (seen.insert(n.get()).second) stack.push_back(n.get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges()) {
      if (!e.node) continue;
      ++dependencies[e.node.get()];
      if (seen.insert(e.node.get()).second) stack.push_back(e.node.get());
    }
  }
  return dependencies;
}

// Runs one node on the gradients that reached it (missing ones as zeros) and returns its
// input gradients; nothing when no gradient reached it.
std::vector<Tensor> run_node(Node& node, std::vector<Tensor> inputs, bool retain_graph) {
  bool any = false;
  for (const Tensor& g : inputs) any = any || g.defined();
  if (!any) return {};
  node.run_output_grad_hooks(inputs);  // Tensor::register_hook on this node's outputs
  const auto& metas = node.output_meta();
  for (size_t i = 0; i < metas.size(); ++i) {
    if (!inputs[i].defined()) inputs[i] = zeros(metas[i].shape, {.dtype = metas[i].dtype, .device = metas[i].device});
  }
  std::vector<Tensor> outputs;
  {
    profiler::Scope scope(node.name(), metas.empty() ? Device::cpu() : metas[0].device);
    outputs = node.apply(std::move(inputs));
  }
  if (!retain_graph) node.release();
  STRATA_CHECK(outputs.empty() || outputs.size() == node.next_edges().size(), "backward: ", node.name(), " returned ",
               outputs.size(), " gradients for ", node.next_edges().size(), " inputs");
  if (anomaly_mode_enabled()) check_backward_outputs(node.name(), outputs);
  return outputs;
}

// Makes this thread's pass the current one for its lifetime, unless a pass is already running
// (activation recompute backpropagates through its recomputed block from inside another pass:
// that pass's final callbacks then run when the outer one ends).
class PassScope {
 public:
  PassScope() : nested_(t_pass != nullptr) {
    if (!nested_) t_pass = &pass_;
  }
  ~PassScope() {
    if (!nested_) t_pass = nullptr;
  }
  PassScope(const PassScope&) = delete;
  PassScope& operator=(const PassScope&) = delete;

  // Callbacks may queue further callbacks (a DDP flush that launches more work).
  void run_final_callbacks() {
    if (nested_) return;
    for (size_t i = 0; i < pass_.final_callbacks.size(); ++i) {
      auto callback = std::move(pass_.final_callbacks[i]);
      callback();
    }
  }

 private:
  bool nested_;
  PassState pass_;
};

}  // namespace

void backward(std::span<const Tensor> roots, std::span<const Tensor> grads, bool retain_graph) {
  NoGradGuard no_grad;  // backward functions are not themselves recorded
  GradientBuffers buffers;
  const std::vector<std::shared_ptr<Node>> root_nodes = seed_roots(roots, grads, buffers);
  std::unordered_map<Node*, int> dependencies = count_dependencies(root_nodes);

  // Nodes run latest-recorded first once every edge into them has delivered.
  std::priority_queue<std::shared_ptr<Node>, std::vector<std::shared_ptr<Node>>, LaterFirst> ready;
  std::unordered_set<Node*> queued;
  for (const auto& n : root_nodes)
    if (dependencies[n.get()] == 0 && queued.insert(n.get()).second) ready.push(n);

  PassScope pass;
  while (!ready.empty()) {
    std::shared_ptr<Node> node = ready.top();
    ready.pop();
    std::vector<Tensor> outputs = run_node(*node, buffers.take(node.get()), retain_graph);
    const auto& edges = node->next_edges();
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.node) continue;
      if (i < outputs.size() && outputs[i].defined()) {
        check_gradient(outputs[i], *e.node, e.input_nr, node->name());
        buffers.add(e, std::move(outputs[i]));
      }
      if (--dependencies[e.node.get()] == 0) ready.push(e.node);
    }
  }
  pass.run_final_callbacks();
}

}  // namespace strata::autograd
