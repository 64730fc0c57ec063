#pragma once
// The types the device-neutral ops (src/ops) exchange with both backends: the op codes of
// the shared functors and the several outputs of the fused kernels. backend/cpu and
// backend/cuda both speak these, so neither backend's interface names the other.
#include <cstdint>

#include "strata/tensor/tensor.h"
#include "strata_kernels/common/compare_ops.h"
#include "strata_kernels/common/elementwise_ops.h"
#include "strata_kernels/common/rounding_ops.h"

namespace strata::backend {

// The op codes are the shared kernels' (strata_kernels/common/elementwise_ops.h), so the CPU
// loops and the CUDA kernels instantiate the same functors.
using BinaryOp = strata_kernels::BinaryCode;
using CompareOp = strata_kernels::CompareCode;
using UnaryOp = strata_kernels::UnaryCode;
using UnaryGradOp = strata_kernels::UnaryGradCode;
using BinaryGradOp = strata_kernels::BinaryGradCode;
using RoundingOp = strata_kernels::RoundingCode;
using ClassifyOp = strata_kernels::ClassifyCode;

// A softmax's (attention's probabilities, log_softmax's values) output in the compute dtype
// (what backward reads) and the op's output: the same tensor, or its 16-bit rounding written
// by the same kernel.
struct SoftmaxOutputs {
  Tensor probs, out;
};

struct LayerNormResult {
  Tensor out;   // x's shape
  Tensor mean;  // [rows], x's dtype
  Tensor rstd;  // [rows], 1 / sqrt(var + eps), biased variance
};
struct LayerNormGrads {
  Tensor dx, dweight, dbias;  // undefined where not requested
};

struct RmsNormResult {
  Tensor out;   // x's shape
  Tensor rstd;  // [rows], 1 / sqrt(mean(x^2) + eps), x's dtype
};
struct RmsNormGrads {
  Tensor dx, dweight;  // undefined where not requested
};

struct CrossEntropyResult {
  Tensor loss;    // shape [], logits' dtype
  Tensor stats;   // [N, 2]: row max m and log(sum exp(x - m)), i.e. logsumexp = m + second
  int64_t count;  // targets not equal to ignore_index
};

}  // namespace strata::backend
