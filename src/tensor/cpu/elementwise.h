#pragma once
#include "strata/tensor/tensor.h"

namespace strata::cpu {

enum class BinaryOp { Add, Sub, Mul, Div };
enum class UnaryOp { Neg, Exp, Log, Sqrt, Tanh, Pow, AddScalar, MulScalar };

// out = a (op) b with broadcasting; same dtype required; result contiguous.
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, const char* name);
// out = f(a; param); result contiguous.
Tensor unary(UnaryOp op, const Tensor& a, double param, const char* name);
// self += alpha * other, other broadcast to self's shape; self may be strided.
void add_inplace(const Tensor& self, const Tensor& other, double alpha);
void mul_inplace(const Tensor& self, double value);

}  // namespace strata::cpu
