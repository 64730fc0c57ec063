#pragma once
// Argument checks and input preparation shared by the nn_functional and linalg ops. The
// checks are device-neutral; each op's device switch (backend/dispatch/device_dispatch.h) picks the kernel.
#include "strata/core/error.h"
#include "strata/tensor/tensor.h"

namespace strata::detail {

// `t` (named `what` in messages) must be a defined float32/float64 tensor.
inline void check_nn_input(const Tensor& t, const char* op, const char* what) {
  STRATA_CHECK(t.defined(), op, ": ", what, " is undefined");
  STRATA_CHECK(t.dtype() == DType::Float32 || t.dtype() == DType::Float64, op, ": ", what, " has dtype ", t.dtype(),
               " (shape ", t.shape(), "); float32 or float64 expected (convert 16-bit tensors with .to())");
}

// The kernels read raw contiguous memory. Detaching first keeps the copy (if any) out of
// the autograd graph: the op records its own node against the original input.
inline Tensor contiguous_data(const Tensor& t) { return t.detach().contiguous(); }

// --- parameters stored in 16 bits, used in float32 ---
// A weight or bias may be bfloat16/float16 where the op computes in float32. The op then
// converts it into a float32 temporary for its own computation only, saves the 16-bit tensor
// (a detached alias of its storage, so storage released and reallocated between forward and
// backward, as ZeRO-3 does, is seen) and converts it again in backward when needed. Its
// gradient is computed in float32 and rounded once to its dtype: the values and roundings of
// `op(x, param.to(Float32))`, without keeping the float32 copy alive until backward.

inline bool is_16bit(DType d) { return d == DType::BFloat16 || d == DType::Float16; }

// `param` (named `what`) must be a defined tensor of dtype `compute`, or 16-bit with
// `compute` float32.
inline void check_param(const Tensor& param, DType compute, const char* op, const char* what) {
  STRATA_CHECK(param.defined(), op, ": ", what, " is undefined");
  STRATA_CHECK(param.dtype() == compute || (is_16bit(param.dtype()) && compute == DType::Float32), op, ": ", what,
               " has dtype ", param.dtype(), " (shape ", param.shape(), ") but the op computes in ", compute,
               "; a parameter must have the compute dtype, or be bfloat16/float16 with float32 compute");
}

// The parameter's values in its compute dtype, outside autograd: a fresh (contiguous) float32
// copy of a 16-bit tensor, to be dropped after use, else the tensor itself detached.
inline Tensor param_values(const Tensor& t) {
  if (!t.defined()) return t;
  return is_16bit(t.dtype()) ? t.detach().to(DType::Float32) : t.detach();
}
// The same, contiguous (for the kernels that read raw memory).
inline Tensor param_data(const Tensor& t) { return t.defined() ? param_values(t).contiguous() : t; }

// A gradient computed in the compute dtype, delivered in the parameter's dtype (rounded once,
// as Tensor::to's backward does).
inline Tensor param_grad(const Tensor& g, DType param_dtype) {
  return g.defined() && g.dtype() != param_dtype ? g.to(param_dtype) : g;
}

}  // namespace strata::detail
