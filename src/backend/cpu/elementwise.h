#pragma once
// CPU kernels of the elementwise ops (ops/elementwise.cpp, ops/unary.cpp, ops/compare.cpp).
// Outputs are fresh contiguous tensors; inputs may be strided and are broadcast where noted.
// The element math is in strata_kernels/common/elementwise_ops.h.
#include "backend/kernel_types.h"

namespace strata::cpu {

using backend::BinaryGradOp;
using backend::BinaryOp;
using backend::CompareOp;
using backend::UnaryGradOp;
using backend::UnaryOp;

// out = a (op) b with broadcasting; same dtype required (checked by the caller).
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, const char* name);
// Bool out = a (op) b with broadcasting.
Tensor compare(CompareOp op, const Tensor& a, const Tensor& b, const char* name);
Tensor unary(UnaryOp op, const Tensor& a, const char* name, double p = 0, double q = 0);
// grad and saved have the same shape.
Tensor unary_grad(UnaryGradOp op, const Tensor& grad, const Tensor& saved, const char* name, double p = 0,
                  double q = 0);
// Of grad's shape (the forward's output shape); a and b broadcast to it.
Tensor binary_grad(BinaryGradOp op, const Tensor& grad, const Tensor& a, const Tensor& b, const char* name);
// cond ? a : b, all three broadcast to `shape`; cond is Bool.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, const Shape& shape, const char* name);
// mask ? value : x, broadcast to `shape`; mask is Bool.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value, const Shape& shape, const char* name);
// self += alpha * other, other broadcast to self's shape; self may be strided.
void add_inplace(const Tensor& self, const Tensor& other, double alpha);
void mul_inplace(const Tensor& self, double value);

}  // namespace strata::cpu
