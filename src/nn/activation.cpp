#include "strata/nn/activation.h"

#include "strata/tensor/ops.h"

namespace strata::nn {

Tensor ReLU::forward(const Tensor& x) {
  auto hooks = forward_hooks();
  return hooks.output(relu(x));
}

Tensor GELU::forward(const Tensor& x) {
  auto hooks = forward_hooks();
  return hooks.output(gelu(x));
}

Tensor Tanh::forward(const Tensor& x) {
  auto hooks = forward_hooks();
  return hooks.output(tanh(x));
}

Tensor Functional::forward(const Tensor& x) {
  auto hooks = forward_hooks();
  return hooks.output(fn_(x));
}

}  // namespace strata::nn
