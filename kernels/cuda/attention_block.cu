// Ring attention's block kernels: common/attention_block.h's rows, one warp per row
// (row_executor.cuh), as the CPU runs them (src/parallel/ring_attention_blocks_cpu.cpp).
#include <stdint.h>

#include "cuda/float_dispatch.cuh"
#include "cuda/row_executor.cuh"
#include "strata_kernels/attention_block.h"
#include "strata_kernels/common/attention_block.h"
#include "strata_kernels/elementwise.h"

namespace {

using namespace strata_kernels;

template <class T>
struct BlockSoftmaxRows {
  const T* s;
  T* p;
  T* lse;
  int64_t c;
  T scale;
  bool causal;
  __device__ void operator()(int64_t r) const {
    ring_block_softmax_row<WarpRow>(s + r * c, p + r * c, lse + r, c, attention_valid_keys(r, c, c, causal), scale);
  }
};

template <class T>
struct BlockProbsRows {
  const T* s;
  const T* lse;
  T* p;
  int64_t c;
  T scale;
  bool causal;
  __device__ void operator()(int64_t r) const {
    ring_block_probs_row<WarpRow>(s + r * c, lse[r], p + r * c, c, attention_valid_keys(r, c, c, causal), scale);
  }
};

template <class T>
struct BlockScoreGradRows {
  T* dp;
  const T* p;
  const T* delta;
  int64_t c;
  T scale;
  __device__ void operator()(int64_t r) const {
    ring_block_score_grad_row<WarpRow>(dp + r * c, p + r * c, delta[r], c, scale);
  }
};

}  // namespace

extern "C" cudaError_t strata_ring_block_softmax(int32_t type, const void* scores, void* probs, void* lse, int64_t rows,
                                                 int64_t c, double scale, int32_t causal, cudaStream_t s) {
  return for_float_type(type, [&](auto t) {
    using T = decltype(t);
    return launch_for_each_row(rows,
                               BlockSoftmaxRows<T>{static_cast<const T*>(scores), static_cast<T*>(probs),
                                                   static_cast<T*>(lse), c, static_cast<T>(scale), causal != 0},
                               s);
  });
}

extern "C" cudaError_t strata_ring_block_probs(int32_t type, const void* scores, const void* lse, void* probs,
                                               int64_t rows, int64_t c, double scale, int32_t causal, cudaStream_t s) {
  return for_float_type(type, [&](auto t) {
    using T = decltype(t);
    return launch_for_each_row(rows,
                               BlockProbsRows<T>{static_cast<const T*>(scores), static_cast<const T*>(lse),
                                                 static_cast<T*>(probs), c, static_cast<T>(scale), causal != 0},
                               s);
  });
}

extern "C" cudaError_t strata_ring_block_score_grad(int32_t type, void* dp, const void* probs, const void* delta,
                                                    int64_t rows, int64_t c, double scale, cudaStream_t s) {
  return for_float_type(type, [&](auto t) {
    using T = decltype(t);
    return launch_for_each_row(rows,
                               BlockScoreGradRows<T>{static_cast<T*>(dp), static_cast<const T*>(probs),
                                                     static_cast<const T*>(delta), c, static_cast<T>(scale)},
                               s);
  });
}
