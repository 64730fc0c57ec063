#include "ops/binary16.h"

#include "backend/cpu/binary16.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/dispatch/device_dispatch.h"
#include "ops/autocast_cast.h"
#include "ops/nn_common.h"
#include "strata/autograd/function.h"

namespace strata::detail {
namespace {

Tensor run(backend::BinaryOp op, const Tensor& a, const Tensor& b, DType out_dtype) {
  const char* name = op == backend::BinaryOp::Add ? "add" : "mul";
  return on_device(
      name, a.device(), [&] { return cpu::binary16(op, a, b, out_dtype); },
      [&] { return cuda_ops::binary16(op, a, b, out_dtype, name); });
}

}  // namespace

Tensor sixteen_bit_binary_kernel(backend::BinaryOp op, const Tensor& a, const Tensor& b, DType out_dtype) {
  const Tensor ac = contiguous_data(a), bc = contiguous_data(b);
  Tensor out = run(op, ac, bc, out_dtype);
  if (!autograd::needs_grad({a, b})) return out;
  if (op == backend::BinaryOp::Add) {
    // d(a + b) = g for both: as is where the dtype matches, else rounded (a counted
    // conversion: the float32 residual gradient a 16-bit branch receives).
    autograd::record("AddBackward", {a, b}, {out}, {},
                     [adt = a.dtype(), bdt = b.dtype()](autograd::BackwardContext& ctx) {
                       const Tensor& g = ctx.grad();
                       return std::vector<Tensor>{ctx.needs(0) ? autocast_convert(g, adt) : Tensor(),
                                                  ctx.needs(1) ? autocast_convert(g, bdt) : Tensor()};
                     });
  } else {
    // d(a b) = (g b, g a), each computed in float32 and rounded once to its operand's dtype.
    autograd::record("MulBackward", {a, b}, {out}, {ac, bc}, [ac, bc](autograd::BackwardContext& ctx) {
      const Tensor g = contiguous_data(ctx.grad());
      return std::vector<Tensor>{ctx.needs(0) ? run(backend::BinaryOp::Mul, g, bc, ac.dtype()) : Tensor(),
                                 ctx.needs(1) ? run(backend::BinaryOp::Mul, g, ac, bc.dtype()) : Tensor()};
    });
  }
  return out;
}

}  // namespace strata::detail
