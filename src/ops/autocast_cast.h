#pragma once
// The conversions autocast's ops perform (strata/ops/autocast.h), counted in
// autocast::counters(), and the weight cache behind products' parameter operands.
#include "strata/tensor/tensor.h"

namespace strata::detail {

// t in `dtype`, detached, as a product's operand: t itself when it has that dtype; a
// float32 parameter (a leaf that requires grad) through the scope's weight cache; anything
// else converted (counted), keeping a transposed matrix transposed so the GEMM reads it
// with a flag.
Tensor autocast_operand(const Tensor& t, DType dtype);

// t.to(dtype), differentiable, counted as a conversion when the dtype changes: the edges
// where an op without a 16-bit kernel widens its 16-bit inputs or rounds its output.
Tensor autocast_convert(const Tensor& t, DType dtype);

// Under a scope with 16-bit activations: the scope's dtype (nullopt otherwise).
std::optional<DType> activation_dtype();

}  // namespace strata::detail

namespace strata::detail {

// f(x widened to float32), rounded to `out`: an op without a 16-bit kernel, on 16-bit data.
// Its values are those of a kernel that reads 16-bit, computes in float32 and rounds its
// result once; gradients come back through the same two conversions.
template <class F>
Tensor via_float32(const Tensor& x, DType out, F&& f) {
  return autocast_convert(f(autocast_convert(x, DType::Float32)), out);
}

// The dtype a norm returns for input x, when it is not x's float32/float64: under 16-bit
// activations the scope's (a norm is where the float32 residual stream becomes 16-bit),
// else a 16-bit x's own; nullopt for the ordinary path.
inline std::optional<DType> norm_output_16bit(const Tensor& x) {
  if (!x.defined()) return std::nullopt;
  const std::optional<DType> scope = activation_dtype();
  const bool x16 = x.dtype() == DType::BFloat16 || x.dtype() == DType::Float16;
  if (scope && (x16 || x.dtype() == DType::Float32)) return scope;
  return x16 ? std::optional<DType>(x.dtype()) : std::nullopt;
}

// A 16-bit x's dtype (an elementwise op's output: float32 math inside); nullopt otherwise.
inline std::optional<DType> sixteen_bit(const Tensor& x) {
  const bool x16 = x.defined() && (x.dtype() == DType::BFloat16 || x.dtype() == DType::Float16);
  return x16 ? std::optional<DType>(x.dtype()) : std::nullopt;
}

}  // namespace strata::detail
