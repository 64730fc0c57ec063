#include "ops/unary16.h"

#include <string>

#include "backend/cpu/unary16.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/dispatch/device_dispatch.h"
#include "ops/nn_common.h"
#include "strata/autograd/function.h"

namespace strata::detail {

Tensor sixteen_bit_activation(backend::UnaryOp op, backend::UnaryGradOp grad_op, const Tensor& x, const char* name,
                              const char* node) {
  Tensor xc = contiguous_data(x);
  Tensor out = on_device(
      name, xc.device(), [&] { return cpu::unary16(op, xc); }, [&] { return cuda_ops::unary16(op, xc, name); });
  if (autograd::needs_grad({x})) {
    autograd::record(node, {x}, {out}, {xc}, [xc, grad_op, name](autograd::BackwardContext& ctx) {
      const Tensor g = contiguous_data(ctx.grad());
      const std::string what = std::string(name) + " backward";
      return std::vector<Tensor>{on_device(
          what.c_str(), xc.device(), [&] { return cpu::unary_grad16(grad_op, g, xc); },
          [&] { return cuda_ops::unary_grad16(grad_op, g, xc, what.c_str()); })};
    });
  }
  return out;
}

}  // namespace strata::detail
