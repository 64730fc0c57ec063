#include "strata/autograd/engine.h"

#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "accumulate_grad.h"
#include "strata/autograd/grad_mode.h"
#include "strata/autograd/node.h"
#include "strata/tensor/factory.h"
#include "strata/tensor/ops/elementwise.h"

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

void backward(std::span<const Tensor> roots, std::span<const Tensor> grads, bool retain_graph) {
  STRATA_CHECK(!roots.empty(), "backward: no tensors given");
  STRATA_CHECK(grads.empty() || grads.size() == roots.size(), "backward: ", roots.size(), " tensors but ",
               grads.size(), " gradients");
  // A pass started from inside another (activation recompute backpropagates through its
  // recomputed block) joins the outer pass: its final callbacks run when the outer one ends.
  const bool nested = t_pass != nullptr;
  NoGradGuard no_grad;  // backward functions are not themselves recorded

  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  auto add_to_buffer = [&](const Edge& edge, Tensor g) {
    std::vector<Tensor>& buf = buffers[edge.node.get()];
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
  };

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
    STRATA_CHECK(g.dtype() == root.dtype(), "backward: ", g.dtype(), " gradient given for ", root.dtype(),
                 " tensor ", i);
    Edge edge = gradient_edge(root);
    add_to_buffer(edge, g);
    root_nodes.push_back(edge.node);
  }

  // Count, for every node reachable from the roots, how many edges point at it. Iterative
  // so that graph depth never touches the C++ stack.
  std::unordered_map<Node*, int> dependencies;
  {
    std::unordered_set<Node*> seen;
    std::vector<Node*> stack;
    for (auto& n : root_nodes)
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
  }

  std::priority_queue<std::shared_ptr<Node>, std::vector<std::shared_ptr<Node>>, LaterFirst> ready;
  {
    std::unordered_set<Node*> queued;
    for (auto& n : root_nodes)
      if (dependencies[n.get()] == 0 && queued.insert(n.get()).second) ready.push(n);
  }

  PassState pass;
  if (!nested) t_pass = &pass;
  struct ResetPass {
    bool active;
    ~ResetPass() {
      if (active) t_pass = nullptr;
    }
  } reset_pass{!nested};

  while (!ready.empty()) {
    std::shared_ptr<Node> node = ready.top();
    ready.pop();
    std::vector<Tensor> inputs;
    if (auto it = buffers.find(node.get()); it != buffers.end()) {
      inputs = std::move(it->second);
      buffers.erase(it);
    }
    bool any = false;
    for (const Tensor& g : inputs) any = any || g.defined();

    std::vector<Tensor> outputs;
    if (any) {
      node->run_output_grad_hooks(inputs);  // Tensor::register_hook on this node's outputs
      const auto& metas = node->output_meta();
      for (size_t i = 0; i < metas.size(); ++i) {
        if (!inputs[i].defined()) inputs[i] = zeros(metas[i].shape, {.dtype = metas[i].dtype});
      }
      outputs = node->apply(std::move(inputs));
      if (!retain_graph) node->release();
      STRATA_CHECK(outputs.empty() || outputs.size() == node->next_edges().size(), "backward: ", node->name(),
                   " returned ", outputs.size(), " gradients for ", node->next_edges().size(), " inputs");
    }
    const auto& edges = node->next_edges();
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.node) continue;
      if (i < outputs.size() && outputs[i].defined()) {
        check_gradient(outputs[i], *e.node, e.input_nr, node->name());
        add_to_buffer(e, std::move(outputs[i]));
      }
      if (--dependencies[e.node.get()] == 0) ready.push(e.node);
    }
  }

  if (nested) return;
  // Callbacks may queue further callbacks (a DDP flush that launches more work).
  for (size_t i = 0; i < pass.final_callbacks.size(); ++i) {
    auto callback = std::move(pass.final_callbacks[i]);
    callback();
  }
}

}  // namespace strata::autograd
