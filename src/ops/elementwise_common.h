#pragma once
// The device switches of the elementwise kernels (cpu/elementwise.h), shared by
// ops/elementwise.cpp, ops/unary.cpp and ops/compare.cpp. `name` is the public op, which
// every message names.
#include "backend/cpu/elementwise.h"
#include "strata/tensor/tensor.h"

namespace strata::detail {

// a and b on one device, of one dtype, with shapes that broadcast: the errors name the op,
// both dtypes and both shapes. Returns their device.
Device check_binary(const char* name, const Tensor& a, const Tensor& b);
// Bool tensors have no arithmetic.
void check_not_bool(const char* name, const Tensor& t);

Tensor binary_op(backend::BinaryOp op, const Tensor& a, const Tensor& b, const char* name);
Tensor unary_op(backend::UnaryOp op, const Tensor& a, const char* name, double p = 0, double q = 0);
Tensor unary_grad_op(backend::UnaryGradOp op, const Tensor& grad, const Tensor& saved, const char* name, double p = 0,
                     double q = 0);
Tensor binary_grad_op(backend::BinaryGradOp op, const Tensor& grad, const Tensor& a, const Tensor& b, const char* name);

}  // namespace strata::detail
