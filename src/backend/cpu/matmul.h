#pragma once
// matmul on the CPU: the shared GEMM plan (../gemm_plan.h) run through cpu::gemm.
#include "strata/tensor/tensor.h"

namespace strata::cpu {

// out[batch.., M, N] = a[i] @ b[i] (+ bias on every row); a [batch.., M, K] or [M, K], b
// [batch.., K, N] or [K, N] (a 2-D operand is shared by every batch entry). float32/float64,
// equal dtypes, inputs detached.
Tensor matmul(const Tensor& a, const Tensor& b, const Shape& batch, const Tensor& bias);

// out[M, N] = sum over the batch of a[i] @ b[i]; a [batch.., M, K], b [batch.., K, N].
Tensor matmul_sum(const Tensor& a, const Tensor& b);

}  // namespace strata::cpu
