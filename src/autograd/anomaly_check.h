#pragma once
// The checks anomaly mode (strata/autograd/anomaly_mode.h) runs: record() on an op's forward
// outputs, the engine on each backward node's results. Callers test anomaly_mode_enabled()
// first, so that the mode costs one flag test when off.
#include <string_view>
#include <vector>

#include "strata/tensor/tensor.h"

namespace strata::autograd {

// Throws naming `op` and the output when an output holds nan or +inf (-inf is allowed).
void check_forward_outputs(std::string_view op, const std::vector<Tensor>& outputs);
// Throws naming the node `op` and the input whose gradient holds nan, +inf or -inf.
void check_backward_outputs(std::string_view op, const std::vector<Tensor>& input_grads);

}  // namespace strata::autograd
