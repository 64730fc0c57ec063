#pragma once
// GEMM stride planning, shared by every GEMM backend (oneDNN/OpenBLAS in cpu/matmul.cpp, a
// cuBLASLt matmul later): how strided operands are read in place (row-major or transposed,
// leading dimension, where each product's matrix starts) and when dimensions merge so that
// a stack of products becomes one larger GEMM. Only geometry: no device code, no dtype.
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "strata/tensor/tensor.h"

namespace strata::gemm {

// How a GEMM reads a rows x cols matrix with row stride rs and column stride cs in place:
// row-major with leading dimension ld (trans = false), or as the transpose of a row-major
// cols x rows matrix (trans = true). Nullopt when neither describes it (copy it first).
struct Layout {
  bool trans = false;
  int64_t ld = 1;
};
std::optional<Layout> layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs);

// Whether dimensions with these sizes and strides (outermost first) address their elements
// with a single stride, as one dimension of `size` elements and stride `stride` would.
struct Merged {
  int64_t size = 1;
  int64_t stride = 1;
};
std::optional<Merged> merge_dims(std::span<const int64_t> sizes, std::span<const int64_t> strides);

// Element offset of every entry of a batch (row-major order) whose dimensions have these
// sizes and strides.
std::vector<int64_t> batch_offsets(std::span<const int64_t> sizes, std::span<const int64_t> strides);

// One operand of a planned GEMM.
struct Operand {
  Tensor t;                      // what to read: the input itself, or a contiguous copy if it cannot be read in place
  Layout layout;                 // how to read each matrix of t
  std::vector<int64_t> offsets;  // element offset of product i's matrix from t's data; all 0 if shared
  std::optional<int64_t> batch_stride;  // offsets[i] = i * batch_stride when they step uniformly (0 if shared)
};

// `batch` products C_i[m, n] = A_i[m, k] @ B_i[k, n]. The output is row-major with ldc = n:
// C_i at i * m * n, or, with sum_batch, C = sum_i A_i @ B_i in one [m, n] matrix.
struct Plan {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  Operand a, b;
  bool sum_batch = false;
};

// out[batch.., M, N] = a[i] @ b[i]; a is [batch.., M, K] or [M, K], b [batch.., K, N] or
// [K, N] (a 2-D operand is shared by every product). When b is 2-D and a's rows share one
// stride, the plan is one GEMM over all rows (batch 1, m = batch.numel() * M).
Plan plan_matmul(const Tensor& a, const Tensor& b, const Shape& batch);

// out[M, N] = sum over the batch of a[i] @ b[i]; a [batch.., M, K], b [batch.., K, N] (the
// gradient of a shared operand). One GEMM with the batch folded into the contraction when
// a's (batch.., K) and b's (batch.., K) dimensions merge; otherwise a summed batch.
Plan plan_matmul_sum(const Tensor& a, const Tensor& b);

// Whether every matrix (the last two dimensions) of t reads row-major in place (unit
// column stride) and no batch stride is negative: for kernels with fixed transpose flags,
// such as attention's per-head products.
bool row_major_in_place(const Tensor& t);

}  // namespace strata::gemm
