// gelu, relu: fused elementwise forward and backward kernels (src/backend/cpu/activation; on
// CUDA the elementwise kernels with the same functors, strata_kernels/common/elementwise_ops.h).
#include "backend/cpu/activation.h"

#include "backend/cuda/cuda_ops.h"
#include "backend/dispatch/device_dispatch.h"
#include "ops/autocast_cast.h"
#include "ops/nn_common.h"
#include "ops/unary16.h"
#include "strata/autograd/function.h"
#include "strata/ops/nn_functional.h"

namespace strata {
namespace {

Tensor gelu_wide(const Tensor& x) {
  detail::check_nn_input(x, "gelu", "input");
  Tensor xc = detail::contiguous_data(x);
  Tensor out = detail::on_device(
      "gelu", xc.device(), [&] { return cpu::gelu_forward(xc); },
      [&] { return cuda_ops::unary(backend::UnaryOp::Gelu, xc, "gelu"); });
  if (autograd::needs_grad({x})) {
    autograd::record("GeluBackward", {x}, {out}, {xc}, [xc](autograd::BackwardContext& ctx) {
      Tensor g = detail::contiguous_data(ctx.grad());
      return std::vector<Tensor>{detail::on_device(
          "gelu backward", xc.device(), [&] { return cpu::gelu_backward(g, xc); },
          [&] { return cuda_ops::unary_grad(backend::UnaryGradOp::Gelu, g, xc, "gelu backward"); })};
    });
  }
  return out;
}

}  // namespace

// A 16-bit x: the 16-bit kernel (float32 math, the output rounded once to x's dtype).
Tensor gelu(const Tensor& x) {
  if (detail::sixteen_bit(x))
    return detail::sixteen_bit_activation(backend::UnaryOp::Gelu, backend::UnaryGradOp::Gelu, x, "gelu",
                                          "GeluBackward");
  return gelu_wide(x);
}

Tensor relu(const Tensor& x) {
  detail::check_nn_input(x, "relu", "input");
  Tensor xc = detail::contiguous_data(x);
  Tensor out = detail::on_device(
      "relu", xc.device(), [&] { return cpu::relu_forward(xc); },
      [&] { return cuda_ops::unary(backend::UnaryOp::Relu, xc, "relu"); });
  if (autograd::needs_grad({x})) {
    // The output decides the mask (out > 0), so x need not be kept alive.
    Tensor saved = out.detach();
    autograd::record("ReluBackward", {x}, {out}, {saved}, [saved](autograd::BackwardContext& ctx) {
      Tensor g = detail::contiguous_data(ctx.grad());
      return std::vector<Tensor>{detail::on_device(
          "relu backward", saved.device(), [&] { return cpu::relu_backward(g, saved); },
          [&] { return cuda_ops::unary_grad(backend::UnaryGradOp::Relu, g, saved, "relu backward"); })};
    });
  }
  return out;
}

}  // namespace strata
