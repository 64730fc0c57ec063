#pragma once
#include <functional>
#include <span>

#include "strata/tensor/tensor.h"

namespace strata::autograd {

// Reverse-mode pass from `roots`, seeded with `grads` (an undefined entry means ones for a
// one-element root). Iterative and dependency-counted, so graph depth is not limited by the
// stack. Without retain_graph the graph's saved tensors are freed. Called from inside a
// backward pass (a node that backpropagates through a recomputation), it runs as part of
// the outer pass: callbacks queued meanwhile run when the outer pass ends.
void backward(std::span<const Tensor> roots, std::span<const Tensor> grads = {}, bool retain_graph = false);

// Runs `callback` once, after the current backward pass has finished every node (DDP waits
// for its buckets here). Only valid while a backward pass is running on this thread.
void queue_final_callback(std::function<void()> callback);
bool in_backward();

}  // namespace strata::autograd
