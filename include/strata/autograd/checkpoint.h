#pragma once
// Activation recompute ("gradient checkpointing"): run a function without keeping the
// activations its backward would need, and run it again during backward.
#include <functional>
#include <vector>

#include "strata/core/random.h"
#include "strata/tensor/tensor.h"

namespace strata::autograd {

using CheckpointFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;

// Returns fn(inputs), keeping only `inputs` for backward. Backward runs fn again with grad
// mode on (the default generator and `generators` set back to their state at the forward, so
// dropout draws the same masks), then backpropagates through that recomputation: gradients
// reach `inputs` and every parameter fn uses, bit for bit as without recompute. fn must be
// deterministic given its inputs and the generators, and must stay callable until backward
// (capture by value). With grad mode off, or no input requiring grad, it is just fn(inputs).
std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs,
                               const std::vector<Generator*>& generators = {});

}  // namespace strata::autograd
