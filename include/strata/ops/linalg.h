#pragma once
// Matrix products through a GEMM library with transpose flags (no materialised
// transposes). Differentiable; CPU, float32 and float64.
#include <cstdint>
#include <vector>

#include "strata/tensor/tensor.h"

namespace strata {

// [n, k] x [k, m] -> [n, m].
// [b.., n, k] x [k, m] -> [b.., n, m]: one GEMM over all b.. * n rows when a's rows can be
//   addressed with one stride (e.g. a contiguous), else one GEMM per batch entry.
// [b.., n, k] x [b.., k, m] -> [b.., n, m] (batch dims equal), and
// [n, k] x [b.., k, m] -> [b.., n, m]: one GEMM per batch entry, run in parallel over the
//   batch when each product is small.
// Unequal batch dims broadcast as in torch.matmul ([2, 1, 3, 4] x [5, 4, 6] -> [2, 5, 3, 6]):
//   an operand is expanded to the common batch as a stride-0 view (not copied), and its
//   gradient is summed back to its own shape. A size mismatch names both shapes.
// A 1-D operand is a row vector on the left and a column vector on the right, and that
// dimension is dropped from the result (as torch.matmul). Operands whose last two dims have
// strides (ld, 1) or (1, ld) (transposed views included) are read in place.
Tensor matmul(const Tensor& a, const Tensor& b);
// x [.., in] , weight [out, in], bias [out] (may be undefined) -> [.., out]  (like torch):
// y = x W^T + b as one GEMM over all rows; backward is one GEMM each for dx and dW.
// weight and bias have x's dtype, or are bfloat16/float16 for a float32 x: a 16-bit
// parameter is converted into a float32 temporary for the forward only and again in backward
// (for dx), and gets its gradient in its own dtype (the float32 gradient rounded once); the
// results equal linear(x, weight.to(Float32), bias.to(Float32)) bit for bit, without keeping
// the float32 copies alive until backward (see nn_functional.h).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});

// The experts of a mixture of experts as one op: x [S, in] holds groups of consecutive rows
// (rows[g] of them, summing to S) and group g is multiplied by its own weights[g] [out, in]:
// y [S, out] = cat over g of linear(x_g, weights[g]), without bias. A group of no rows is not
// run and its weight gets no gradient (as a layer never called). On CUDA each product (the
// output, and in backward the input and weight gradients) is one cuBLAS grouped GEMM over
// all groups; on the CPU, and on CUDA where cuBLAS has no grouped kernel for the dtype, a
// loop of the GEMMs linear runs, so the CPU's values equal linear's on each group bit for bit.
// Dtypes, 16-bit weights and autocast as linear.
Tensor grouped_linear(const Tensor& x, const std::vector<int64_t>& rows, const std::vector<Tensor>& weights);

// The library that runs large float32 CPU products: "onednn" or "openblas", as chosen by
// STRATA_GEMM_BACKEND when strata was built. Small products and float64 always run on OpenBLAS.
const char* gemm_backend();

}  // namespace strata
