#pragma once
// The GEMM calls and autocast rules that matmul, linear (linalg.cpp) and grouped_linear
// (grouped_linear.cpp) share: one product helper per device switch, so each op's CPU and
// CUDA paths run the same calls.
#include <initializer_list>
#include <optional>
#include <vector>

#include "strata/tensor/tensor.h"

namespace strata::products {

// Under autocast (strata/ops/autocast.h) a product computes as torch.autocast's: operands in
// the 16-bit dtype (a parameter's from the scope's weight cache), float32 accumulation, the
// result rounded to that dtype, and returned in it when the scope keeps activations 16-bit,
// else in float32. On CUDA cuBLASLt runs the 16-bit GEMM; the CPU widens the 16-bit operands
// for its float32 GEMM and rounds the result: the same values.
struct Cast {
  DType dtype;
  bool keep16;  // the result stays in `dtype` (autocast::Options::activations)
};
using CastOpt = std::optional<Cast>;

// The cast a product of `operands` runs under: under a scope, when each operand is float32
// or 16-bit and some operand is float32 (all 16-bit operands run as they do outside the
// scope, unless the scope keeps activations 16-bit, when the CPU too must take them).
CastOpt autocast_for(std::initializer_list<Tensor> operands);
CastOpt autocast_for(const std::vector<Tensor>& operands);

// The product's result in the dtype the scope returns; float32 costs a (counted) conversion.
Tensor scoped_result(const Tensor& out16, const Cast& cast);

// out[batch.., M, N] = a[i] @ b[i] (+ bias) on 16-bit operands (see Cast).
Tensor bmm16(const char* op, const Tensor& a16, const Tensor& b16, const Shape& batch, const Tensor& bias16,
             const Cast& cast);
// sum over the batch of a[i] @ b[i] on 16-bit operands.
Tensor bmm_sum16(const char* op, const Tensor& a16, const Tensor& b16, const Cast& cast);

// out[batch.., M, N] = a[i] @ b[i] (+ bias on every row). a is [batch.., M, K] or [M, K],
// b is [batch.., K, N] or [K, N]; a 2-D operand is shared by every batch entry. `op` names
// the public op in errors.
Tensor bmm(const char* op, const Tensor& a, const Tensor& b, const Shape& batch, const Tensor& bias = {});
// out[M, N] = sum over the batch of a[i] @ b[i]; a [batch.., M, K], b [batch.., K, N] (the
// gradient of an operand that was shared across a batch).
Tensor bmm_sum(const char* op, const Tensor& a, const Tensor& b);

// A gradient delivered in its input's dtype (a counted conversion where they differ).
Tensor in_dtype(const Tensor& g, DType dtype);

std::vector<int64_t> dim_range(int64_t begin, int64_t end);
Shape leading(const Shape& s, size_t drop);

// float32/float64 everywhere; bfloat16/float16 too on CUDA (cuBLASLt accumulates them in
// float32; the CPU GEMM backends take neither).
void check_operand(const Tensor& t, const char* op, const char* name, const CastOpt& cast);

// A parameter's values in the compute dtype: with 16-bit compute (CUDA only) the parameter
// has that dtype already (check_param) and is used as is; otherwise as detail::param_values.
Tensor compute_values(const Tensor& param, DType compute);

}  // namespace strata::products
