// gelu, relu: fused elementwise forward and backward kernels (src/tensor/cpu/activation).
#include "../cpu/activation.h"

#include "nn_common.h"
#include "strata/autograd/function.h"
#include "strata/tensor/ops/nn_functional.h"

namespace strata {

Tensor gelu(const Tensor& x) {
  detail::check_nn_input(x, "gelu", "input");
  Tensor xc = detail::contiguous_data(x);
  Tensor out = cpu::gelu_forward(xc);
  if (autograd::needs_grad({x})) {
    autograd::record("GeluBackward", {x}, {out}, [xc](autograd::BackwardContext& ctx) {
      return std::vector<Tensor>{cpu::gelu_backward(detail::contiguous_data(ctx.grad()), xc)};
    });
  }
  return out;
}

Tensor relu(const Tensor& x) {
  detail::check_nn_input(x, "relu", "input");
  Tensor out = cpu::relu_forward(detail::contiguous_data(x));
  if (autograd::needs_grad({x})) {
    // The output decides the mask (out > 0), so x need not be kept alive.
    autograd::record("ReluBackward", {x}, {out}, [saved = out.detach()](autograd::BackwardContext& ctx) {
      return std::vector<Tensor>{cpu::relu_backward(detail::contiguous_data(ctx.grad()), saved)};
    });
  }
  return out;
}

}  // namespace strata
