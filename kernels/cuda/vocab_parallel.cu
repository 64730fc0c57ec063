// Tensor parallelism's vocabulary kernels: the vocab-parallel cross-entropy's rows
// (common/vocab_parallel_rows.h run by WarpRow, one warp per row, as the CPU runs them with
// CpuRow) and VocabParallelEmbedding's index step (common/vocab_shard_index.h, one thread
// per token), for float32 and float64.
#include <stdint.h>

#include "cuda/float_dispatch.cuh"
#include "cuda/row_executor.cuh"
#include "strata_kernels/common/vocab_parallel_rows.h"
#include "strata_kernels/common/vocab_shard_index.h"
#include "strata_kernels/elementwise.h"
#include "strata_kernels/vocab_parallel.h"

namespace {

using namespace strata_kernels;

constexpr int kThreads = kFloatKernelThreads;

__global__ void reset_status_kernel(StrataVocabTargetStatus* status) {
  status->counted = 0;
  status->first_bad_row = INT64_MAX;
}

// Integer atomics: the count and the first bad row do not depend on the order.
__global__ void check_targets_kernel(const int64_t* targets, int64_t rows, int64_t vocab, int64_t ignore_index,
                                     StrataVocabTargetStatus* status) {
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; r < rows;
       r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int32_t state = vp_target_state(targets[r], vocab, ignore_index);
    if (state == kVocabTargetCounted) atomicAdd(&status->counted, 1ull);
    if (state == kVocabTargetBad) atomicMin(&status->first_bad_row, static_cast<long long>(r));
  }
}

template <class T>
struct RowMax {
  const T* x;
  int64_t cols, real;
  double* max;
  __device__ void operator()(int64_t r) const {
    const double m = vp_row_max<WarpRow>(x + r * cols, real);
    if (WarpRow::leader()) max[r] = m;
  }
};

template <class T>
struct RowSums {
  const T* x;
  const int64_t* targets;
  int64_t cols, real, start, ignore_index;
  const double* max;
  double *sum_exp, *target_logit;
  __device__ void operator()(int64_t r) const {
    const T* row = x + r * cols;
    const double s = vp_row_sum_exp<WarpRow>(row, real, max[r]);
    if (WarpRow::leader()) {
      sum_exp[r] = s;
      target_logit[r] = vp_target_logit(row, vp_local_target(targets[r], start, real, ignore_index));
    }
  }
};

template <class T>
struct GradRows {
  const T* x;
  const int64_t* targets;
  int64_t cols, real, start, vocab, ignore_index;
  const double *max, *sum_exp;
  double scale;
  T* dx;
  __device__ void operator()(int64_t r) const {
    const int64_t t = targets[r];
    vp_grad_row<WarpRow>(x + r * cols, cols, real, vp_local_target(t, start, real, ignore_index),
                         vp_target_state(t, vocab, ignore_index) == kVocabTargetCounted, max[r], sum_exp[r], scale,
                         dx + r * cols);
  }
};

// One warp: the rows' losses in the rows' 32-lane order, as the CPU's CpuRow::sum.
template <class T>
__global__ void loss_kernel(const int64_t* targets, int64_t rows, int64_t vocab, int64_t ignore_index,
                            const double* max, const double* sum_exp, const double* target_logit, int64_t counted,
                            T* loss) {
  const double total = vp_loss_total<WarpRow>(targets, rows, vocab, ignore_index, max, sum_exp, target_logit);
  if (WarpRow::leader()) *loss = static_cast<T>(counted > 0 ? total / static_cast<double>(counted) : 0.0);
}

__global__ void shard_index_kernel(const int64_t* tokens, int64_t n, int64_t vocab, int64_t start, int64_t part,
                                   int64_t* local, bool* outside, int32_t* bad) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (!vp_shard_index(tokens[i], vocab, start, part, local + i, outside + i)) *bad = 1;
  }
}

}  // namespace

extern "C" cudaError_t strata_vocab_parallel_check_targets(const int64_t* targets, int64_t rows, int64_t vocab,
                                                           int64_t ignore_index, StrataVocabTargetStatus* status,
                                                           cudaStream_t s) {
  reset_status_kernel<<<1, 1, 0, s>>>(status);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess || rows == 0) return err;
  check_targets_kernel<<<grid_for(rows), kThreads, 0, s>>>(targets, rows, vocab, ignore_index, status);
  return cudaGetLastError();
}

extern "C" cudaError_t strata_vocab_parallel_row_max(int32_t type, const void* logits, int64_t rows, int64_t cols,
                                                     int64_t real, double* max, cudaStream_t s) {
  return for_float_type(type, [&](auto t) {
    using T = decltype(t);
    return launch_for_each_row(rows, RowMax<T>{static_cast<const T*>(logits), cols, real, max}, s);
  });
}

extern "C" cudaError_t strata_vocab_parallel_row_sums(int32_t type, const void* logits, const int64_t* targets,
                                                      int64_t rows, int64_t cols, int64_t real, int64_t start,
                                                      int64_t ignore_index, const double* max, double* sum_exp,
                                                      double* target_logit, cudaStream_t s) {
  return for_float_type(type, [&](auto t) {
    using T = decltype(t);
    return launch_for_each_row(
        rows,
        RowSums<T>{static_cast<const T*>(logits), targets, cols, real, start, ignore_index, max, sum_exp, target_logit},
        s);
  });
}

extern "C" cudaError_t strata_vocab_parallel_loss(int32_t type, const int64_t* targets, int64_t rows, int64_t vocab,
                                                  int64_t ignore_index, const double* max, const double* sum_exp,
                                                  const double* target_logit, int64_t counted, void* loss,
                                                  cudaStream_t s) {
  return for_float_type(type, [&](auto t) {
    using T = decltype(t);
    loss_kernel<T><<<1, kRowLanes, 0, s>>>(targets, rows, vocab, ignore_index, max, sum_exp, target_logit, counted,
                                           static_cast<T*>(loss));
    return cudaGetLastError();
  });
}

extern "C" cudaError_t strata_vocab_parallel_grad(int32_t type, const void* logits, const int64_t* targets,
                                                  int64_t rows, int64_t cols, int64_t real, int64_t start,
                                                  int64_t vocab, int64_t ignore_index, const double* max,
                                                  const double* sum_exp, double scale, void* dx, cudaStream_t s) {
  return for_float_type(type, [&](auto t) {
    using T = decltype(t);
    return launch_for_each_row(rows,
                               GradRows<T>{static_cast<const T*>(logits), targets, cols, real, start, vocab,
                                           ignore_index, max, sum_exp, scale, static_cast<T*>(dx)},
                               s);
  });
}

extern "C" cudaError_t strata_vocab_shard_indices(const int64_t* tokens, int64_t n, int64_t vocab, int64_t start,
                                                  int64_t part, int64_t* local, void* outside, int32_t* bad,
                                                  cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  shard_index_kernel<<<grid_for(n), kThreads, 0, s>>>(tokens, n, vocab, start, part, local, static_cast<bool*>(outside),
                                                      bad);
  return cudaGetLastError();
}
