#include "strata/nn/activation.h"

#include "strata/ops.h"

namespace strata::nn {

Tensor Functional::forward(const Tensor& x) {
  auto hooks = forward_hooks();
  return hooks.output(fn_(x));
}

ReLU::ReLU() : Functional([](const Tensor& x) { return relu(x); }) {}
GELU::GELU() : Functional([](const Tensor& x) { return gelu(x); }) {}
Tanh::Tanh() : Functional([](const Tensor& x) { return tanh(x); }) {}

}  // namespace strata::nn
