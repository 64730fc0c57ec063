#pragma once
// Gradient sums for autograd (which sits below the differentiable ops): the Add kernel of
// either device, with no autograd recording and no broadcasting. The ops' add runs the same
// kernels, so a sum here rounds as add(a, b) would.
#include "strata/tensor/tensor.h"

namespace strata::backend {

// a + b; same shape, dtype and device. `what` names the caller in errors.
Tensor add_same_shape(const Tensor& a, const Tensor& b, const char* what);
// dst += src; same shape, dtype and device.
void add_into(const Tensor& dst, const Tensor& src, const char* what);

}  // namespace strata::backend
