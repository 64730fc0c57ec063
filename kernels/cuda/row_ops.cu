// Row kernels: the row functions of common/row_softmax.h and common/row_norms.h run by
// WarpRow (one warp per row), and the column sums of common/column_sum.h (one thread per
// (row block, column)), for float32 and float64.
#include <stdint.h>

#include "cuda/float_dispatch.cuh"
#include "cuda/row_executor.cuh"
#include "strata_kernels/common/column_sum.h"
#include "strata_kernels/common/row_norms.h"
#include "strata_kernels/common/row_softmax.h"
#include "strata_kernels/elementwise.h"
#include "strata_kernels/row_ops.h"

namespace {

using namespace strata_kernels;

constexpr int kThreads = kFloatKernelThreads;

template <class X, class T, class Y>
struct SoftmaxRows {
  const X* x;
  T* y;
  Y* y16;  // null when Y is T
  int64_t n;
  bool log_softmax;
  __device__ void operator()(int64_t r) const {
    softmax_row<WarpRow>(x + r * n, y + r * n, y16 == nullptr ? y16 : y16 + r * n, n, log_softmax);
  }
};

template <class G, class T>
struct SoftmaxBackwardRows {
  const G* g;
  const T* y;
  G* dx;
  int64_t n;
  bool log_softmax;
  __device__ void operator()(int64_t r) const {
    softmax_backward_row<WarpRow>(g + r * n, y + r * n, dx + r * n, n, log_softmax);
  }
};

template <class X, class T, class Y>
struct AttentionSoftmaxRows {
  const X* s;
  T* p;
  Y* p16;  // null when Y is T
  int64_t tq, tk;
  T scale;
  bool causal;
  __device__ void operator()(int64_t r) const {
    prefix_softmax_row<WarpRow>(s + r * tk, p + r * tk, p16 == nullptr ? p16 : p16 + r * tk, tk,
                                attention_valid_keys(r, tq, tk, causal), scale);
  }
};

template <class G, class T>
struct AttentionSoftmaxBackwardRows {
  const G* g;
  const T* p;
  G* dx;
  int64_t tq, tk;
  T scale;
  bool causal;
  __device__ void operator()(int64_t r) const {
    prefix_softmax_backward_row<WarpRow>(g + r * tk, p + r * tk, dx + r * tk, tk,
                                         attention_valid_keys(r, tq, tk, causal), scale);
  }
};

template <class X, class T, class I>
struct CrossEntropyRows {
  const X* x;
  const I* targets;
  int64_t cols, classes, ignore_index;  // row length; the first `classes` columns take part
  T* stats;
  double* row_loss;
  StrataCrossEntropyStatus* status;
  __device__ void operator()(int64_t r) const {
    const int64_t target = static_cast<int64_t>(targets[r]);
    const bool ignored = target == ignore_index;
    if (ignored || target < 0 || target >= classes) {
      if (WarpRow::leader()) {
        stats[2 * r] = stats[2 * r + 1] = T(0);
        row_loss[r] = 0;
        if (!ignored) atomicMin(&status->first_bad_row, static_cast<long long>(r));
      }
      return;
    }
    const double loss = cross_entropy_row<WarpRow>(x + r * cols, classes, target, stats + 2 * r);
    if (WarpRow::leader()) {
      row_loss[r] = loss;
      atomicAdd(&status->count, 1ull);
    }
  }
};

// The rows' losses summed by one warp in the row order, as the CPU's CpuRow::sum.
__global__ void sum_row_losses_kernel(const double* row_loss, int64_t rows, StrataCrossEntropyStatus* status) {
  const double total = WarpRow::sum(rows, [&](int64_t i) { return row_loss[i]; });
  if (WarpRow::leader()) status->total = total;
}

__global__ void reset_status_kernel(StrataCrossEntropyStatus* status) {
  status->count = 0;
  status->first_bad_row = INT64_MAX;
  status->total = 0;
}

template <class X, class T, class I>
struct CrossEntropyBackwardRows {
  const X* x;
  const I* targets;
  const T* stats;
  int64_t cols, classes, ignore_index;
  T coef;
  X* dx;
  __device__ void operator()(int64_t r) const {
    const int64_t target = static_cast<int64_t>(targets[r]);
    X* drow = dx + r * cols;
    if (target == ignore_index) {
      WarpRow::for_each(cols, [&](int64_t j) { store(drow[j], T(0)); });
      return;
    }
    cross_entropy_backward_row<WarpRow>(x + r * cols, classes, cols, target, stats + 2 * r, coef, drow);
  }
};

template <class X, class T, class Y>
struct LayerNormRows {
  const X* x;
  const T *w, *b;
  int64_t d;
  double eps;
  Y* y;
  T *mean, *rstd;
  __device__ void operator()(int64_t r) const {
    layer_norm_row<WarpRow>(x + r * d, w, b, d, eps, y + r * d, mean + r, rstd + r);
  }
};

template <class X, class T, class G>
struct LayerNormBackwardRows {
  const G* g;
  const X* x;
  const T *w, *mean, *rstd;
  int64_t d;
  X* dx;
  __device__ void operator()(int64_t r) const {
    layer_norm_backward_row<WarpRow>(g + r * d, x + r * d, w, mean[r], rstd[r], d, dx + r * d);
  }
};

template <class X, class T, class Y>
struct RmsNormRows {
  const X* x;
  const T* w;
  int64_t d;
  double eps;
  Y* y;
  T* rstd;
  __device__ void operator()(int64_t r) const { rms_norm_row<WarpRow>(x + r * d, w, d, eps, y + r * d, rstd + r); }
};

template <class X, class T, class G>
struct RmsNormBackwardRows {
  const G* g;
  const X* x;
  const T *w, *rstd;
  int64_t d;
  X* dx;
  __device__ void operator()(int64_t r) const {
    rms_norm_backward_row<WarpRow>(g + r * d, x + r * d, w, rstd[r], d, dx + r * d);
  }
};

// column_sum.h step 1: the partial of (row block, column) in row order. Layer norm keeps
// [dweight | dbias] per block (stride 2 d).
template <class X, class T, class G>
__global__ void layer_norm_partials_kernel(const G* g, const X* x, const T* mean, const T* rstd, int64_t rows,
                                           int64_t d, T* partials) {
  const int64_t blocks = column_blocks(rows);
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < blocks * d;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = k / d, j = k % d;
    const int64_t end = (b + 1) * kColumnBlockRows < rows ? (b + 1) * kColumnBlockRows : rows;
    T dw = 0, db = 0;
    for (int64_t i = b * kColumnBlockRows; i < end; ++i) {
      const T gv = widen(g[i * d + j]);
      dw += layer_norm_dweight_term<T>(gv, widen(x[i * d + j]), mean[i], rstd[i]);
      db += gv;
    }
    partials[b * 2 * d + j] = dw;
    partials[b * 2 * d + d + j] = db;
  }
}

template <class X, class T, class G>
__global__ void rms_norm_partials_kernel(const G* g, const X* x, const T* rstd, int64_t rows, int64_t d, T* partials) {
  const int64_t blocks = column_blocks(rows);
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < blocks * d;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = k / d, j = k % d;
    const int64_t end = (b + 1) * kColumnBlockRows < rows ? (b + 1) * kColumnBlockRows : rows;
    T dw = 0;
    for (int64_t i = b * kColumnBlockRows; i < end; ++i)
      dw += rms_norm_dweight_term<T>(widen(g[i * d + j]), widen(x[i * d + j]), rstd[i]);
    partials[b * d + j] = dw;
  }
}

// column_sum.h step 2: out[j] = total of column offset + j.
template <class T>
__global__ void column_totals_kernel(const T* partials, int64_t blocks, int64_t stride, int64_t offset, int64_t d,
                                     T* out) {
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < d;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[j] = column_total(partials + offset, blocks, stride, j);
}

template <class T>
cudaError_t column_totals(const T* partials, int64_t blocks, int64_t stride, int64_t offset, int64_t d, void* out,
                          cudaStream_t s) {
  if (out == nullptr) return cudaSuccess;
  column_totals_kernel<<<grid_for(d), kThreads, 0, s>>>(partials, blocks, stride, offset, d, static_cast<T*>(out));
  return cudaGetLastError();
}

template <class F>
cudaError_t for_index_type(int32_t type, F&& f) {
  switch (type) {
    case STRATA_ELEMENT_I32: return f(int32_t{});
    case STRATA_ELEMENT_I64: return f(int64_t{});
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

extern "C" cudaError_t strata_softmax_rows(int32_t type, int32_t x_type, const void* x, void* y, void* y16,
                                           int64_t rows, int64_t n, int32_t log_softmax, cudaStream_t s) {
  return for_row_storage(type, x_type, x_type, [&](auto xt, auto t, auto yt) {
    using X = decltype(xt);
    using T = decltype(t);
    using Y = decltype(yt);
    Y* out16 = SeparateStorage<T, Y>::value ? static_cast<Y*>(y16) : nullptr;
    return launch_for_each_row(
        rows, SoftmaxRows<X, T, Y>{static_cast<const X*>(x), static_cast<T*>(y), out16, n, log_softmax != 0}, s);
  });
}

extern "C" cudaError_t strata_softmax_backward_rows(int32_t type, int32_t grad_type, const void* grad, const void* y,
                                                    void* dx, int64_t rows, int64_t n, int32_t log_softmax,
                                                    cudaStream_t s) {
  return for_row_storage(type, grad_type, grad_type, [&](auto gt, auto t, auto) {
    using G = decltype(gt);
    using T = decltype(t);
    return launch_for_each_row(rows,
                               SoftmaxBackwardRows<G, T>{static_cast<const G*>(grad), static_cast<const T*>(y),
                                                         static_cast<G*>(dx), n, log_softmax != 0},
                               s);
  });
}

extern "C" cudaError_t strata_attention_softmax_rows(int32_t type, int32_t scores_type, int32_t out_type,
                                                     const void* scores, void* probs, void* out, int64_t rows,
                                                     int64_t tq, int64_t tk, double scale, int32_t causal,
                                                     cudaStream_t s) {
  return for_row_storage(type, scores_type, out_type, [&](auto xt, auto t, auto yt) {
    using X = decltype(xt);
    using T = decltype(t);
    using Y = decltype(yt);
    Y* p16 = SeparateStorage<T, Y>::value ? static_cast<Y*>(out) : nullptr;
    return launch_for_each_row(rows,
                               AttentionSoftmaxRows<X, T, Y>{static_cast<const X*>(scores), static_cast<T*>(probs), p16,
                                                             tq, tk, static_cast<T>(scale), causal != 0},
                               s);
  });
}

extern "C" cudaError_t strata_attention_softmax_backward_rows(int32_t type, int32_t grad_type, const void* grad,
                                                              const void* probs, void* dx, int64_t rows, int64_t tq,
                                                              int64_t tk, double scale, int32_t causal,
                                                              cudaStream_t s) {
  return for_row_storage(type, grad_type, grad_type, [&](auto gt, auto t, auto) {
    using G = decltype(gt);
    using T = decltype(t);
    return launch_for_each_row(
        rows,
        AttentionSoftmaxBackwardRows<G, T>{static_cast<const G*>(grad), static_cast<const T*>(probs),
                                           static_cast<G*>(dx), tq, tk, static_cast<T>(scale), causal != 0},
        s);
  });
}

extern "C" cudaError_t strata_cross_entropy_rows(int32_t type, int32_t logits_type, int32_t index_type,
                                                 const void* logits, const void* targets, int64_t rows, int64_t cols,
                                                 int64_t classes, int64_t ignore_index, void* stats, double* row_loss,
                                                 StrataCrossEntropyStatus* status, cudaStream_t s) {
  reset_status_kernel<<<1, 1, 0, s>>>(status);
  cudaError_t err = for_row_storage(type, logits_type, logits_type, [&](auto xt, auto t, auto) {
    using X = decltype(xt);
    using T = decltype(t);
    return for_index_type(index_type, [&](auto i) {
      using I = decltype(i);
      return launch_for_each_row(
          rows,
          CrossEntropyRows<X, T, I>{static_cast<const X*>(logits), static_cast<const I*>(targets), cols, classes,
                                    ignore_index, static_cast<T*>(stats), row_loss, status},
          s);
    });
  });
  if (err != cudaSuccess) return err;
  sum_row_losses_kernel<<<1, kRowLanes, 0, s>>>(row_loss, rows, status);
  return cudaGetLastError();
}

extern "C" cudaError_t strata_cross_entropy_backward_rows(int32_t type, int32_t logits_type, int32_t index_type,
                                                          const void* logits, const void* targets, const void* stats,
                                                          int64_t rows, int64_t cols, int64_t classes,
                                                          int64_t ignore_index, double coef, void* dx, cudaStream_t s) {
  return for_row_storage(type, logits_type, logits_type, [&](auto xt, auto t, auto) {
    using X = decltype(xt);
    using T = decltype(t);
    return for_index_type(index_type, [&](auto i) {
      using I = decltype(i);
      return launch_for_each_row(
          rows,
          CrossEntropyBackwardRows<X, T, I>{static_cast<const X*>(logits), static_cast<const I*>(targets),
                                            static_cast<const T*>(stats), cols, classes, ignore_index,
                                            static_cast<T>(coef), static_cast<X*>(dx)},
          s);
    });
  });
}

extern "C" cudaError_t strata_layer_norm_rows(int32_t type, int32_t x_type, int32_t y_type, const void* x,
                                              const void* weight, const void* bias, int64_t rows, int64_t d, double eps,
                                              void* y, void* mean, void* rstd, cudaStream_t s) {
  return for_row_storage(type, x_type, y_type, [&](auto xt, auto t, auto yt) {
    using X = decltype(xt);
    using T = decltype(t);
    using Y = decltype(yt);
    return launch_for_each_row(
        rows,
        LayerNormRows<X, T, Y>{static_cast<const X*>(x), static_cast<const T*>(weight), static_cast<const T*>(bias), d,
                               eps, static_cast<Y*>(y), static_cast<T*>(mean), static_cast<T*>(rstd)},
        s);
  });
}

extern "C" cudaError_t strata_layer_norm_backward(int32_t type, int32_t x_type, int32_t y_type, const void* grad,
                                                  const void* x, const void* weight, const void* mean, const void* rstd,
                                                  int64_t rows, int64_t d, void* dx, void* partials, void* dweight,
                                                  void* dbias, cudaStream_t s) {
  return for_row_storage(type, x_type, y_type, [&](auto xt, auto t, auto gt) -> cudaError_t {
    using X = decltype(xt);
    using T = decltype(t);
    using G = decltype(gt);
    const G* g = static_cast<const G*>(grad);
    const X* xv = static_cast<const X*>(x);
    const T* mu = static_cast<const T*>(mean);
    const T* rs = static_cast<const T*>(rstd);
    if (dx != nullptr) {
      const cudaError_t err = launch_for_each_row(
          rows, LayerNormBackwardRows<X, T, G>{g, xv, static_cast<const T*>(weight), mu, rs, d, static_cast<X*>(dx)},
          s);
      if (err != cudaSuccess) return err;
    }
    if (dweight == nullptr && dbias == nullptr) return cudaSuccess;
    const int64_t blocks = column_blocks(rows);
    T* p = static_cast<T*>(partials);
    layer_norm_partials_kernel<<<grid_for(blocks * d), kThreads, 0, s>>>(g, xv, mu, rs, rows, d, p);
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess) err = column_totals(p, blocks, 2 * d, 0, d, dweight, s);
    if (err == cudaSuccess) err = column_totals(p, blocks, 2 * d, d, d, dbias, s);
    return err;
  });
}

extern "C" cudaError_t strata_rms_norm_rows(int32_t type, int32_t x_type, int32_t y_type, const void* x,
                                            const void* weight, int64_t rows, int64_t d, double eps, void* y,
                                            void* rstd, cudaStream_t s) {
  return for_row_storage(type, x_type, y_type, [&](auto xt, auto t, auto yt) {
    using X = decltype(xt);
    using T = decltype(t);
    using Y = decltype(yt);
    return launch_for_each_row(rows,
                               RmsNormRows<X, T, Y>{static_cast<const X*>(x), static_cast<const T*>(weight), d, eps,
                                                    static_cast<Y*>(y), static_cast<T*>(rstd)},
                               s);
  });
}

extern "C" cudaError_t strata_rms_norm_backward(int32_t type, int32_t x_type, int32_t y_type, const void* grad,
                                                const void* x, const void* weight, const void* rstd, int64_t rows,
                                                int64_t d, void* dx, void* partials, void* dweight, cudaStream_t s) {
  return for_row_storage(type, x_type, y_type, [&](auto xt, auto t, auto gt) -> cudaError_t {
    using X = decltype(xt);
    using T = decltype(t);
    using G = decltype(gt);
    const G* g = static_cast<const G*>(grad);
    const X* xv = static_cast<const X*>(x);
    const T* rs = static_cast<const T*>(rstd);
    if (dx != nullptr) {
      const cudaError_t err = launch_for_each_row(
          rows, RmsNormBackwardRows<X, T, G>{g, xv, static_cast<const T*>(weight), rs, d, static_cast<X*>(dx)}, s);
      if (err != cudaSuccess) return err;
    }
    if (dweight == nullptr) return cudaSuccess;
    const int64_t blocks = column_blocks(rows);
    T* p = static_cast<T*>(partials);
    rms_norm_partials_kernel<<<grid_for(blocks * d), kThreads, 0, s>>>(g, xv, rs, rows, d, p);
    const cudaError_t err = cudaGetLastError();
    return err == cudaSuccess ? column_totals(p, blocks, d, 0, d, dweight, s) : err;
  });
}
