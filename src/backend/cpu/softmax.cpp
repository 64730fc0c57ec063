#include "backend/cpu/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/dim_layout.h"
#include "backend/cpu/multiversion.h"
#include "backend/cpu/row_storage.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/common/fast_math.h"
#include "strata_kernels/common/row_softmax.h"
#include "tensor/dtype_dispatch.h"

namespace strata::cpu {
namespace {

using strata_kernels::CpuRow;
using strata_kernels::fast_exp;

constexpr int64_t kParallelThreshold = 16384;  // elements; below this threads cost more than they save
constexpr int64_t kColumnChunk = 64;

// Softmax over the middle dimension of [outer, n, inner] for columns [c0, c1) of one outer
// index: every step is a vector loop over the columns.
template <class T>
STRATA_ALWAYS_INLINE void softmax_columns(const T* x, T* y, int64_t n, int64_t inner, int64_t c0, int64_t c1,
                                          bool log) {
  T m[kColumnChunk], s[kColumnChunk];
  const int64_t w = c1 - c0;
  x += c0;
  y += c0;
  for (int64_t c = 0; c < w; ++c) {
    m[c] = -std::numeric_limits<T>::infinity();
    s[c] = 0;
  }
  for (int64_t j = 0; j < n; ++j) {
    const T* xr = x + j * inner;
#pragma omp simd
    for (int64_t c = 0; c < w; ++c) m[c] = xr[c] > m[c] ? xr[c] : m[c];
  }
  for (int64_t j = 0; j < n; ++j) {
    const T* xr = x + j * inner;
    T* yr = y + j * inner;
    if (log) {
#pragma omp simd
      for (int64_t c = 0; c < w; ++c) s[c] += fast_exp(xr[c] - m[c]);
    } else {
#pragma omp simd
      for (int64_t c = 0; c < w; ++c) {
        const T e = fast_exp(xr[c] - m[c]);
        yr[c] = e;
        s[c] += e;
      }
    }
  }
  if (log) {
    for (int64_t c = 0; c < w; ++c) s[c] = std::log(s[c]);
    for (int64_t j = 0; j < n; ++j) {
      const T* xr = x + j * inner;
      T* yr = y + j * inner;
#pragma omp simd
      for (int64_t c = 0; c < w; ++c) yr[c] = (xr[c] - m[c]) - s[c];
    }
  } else {
    for (int64_t c = 0; c < w; ++c) s[c] = T(1) / s[c];
    for (int64_t j = 0; j < n; ++j) {
      T* yr = y + j * inner;
#pragma omp simd
      for (int64_t c = 0; c < w; ++c) yr[c] *= s[c];
    }
  }
}

template <class T>
STRATA_ALWAYS_INLINE void softmax_backward_columns(const T* g, const T* y, T* dx, int64_t n, int64_t inner, int64_t c0,
                                                   int64_t c1, bool log) {
  T acc[kColumnChunk];
  const int64_t w = c1 - c0;
  g += c0;
  y += c0;
  dx += c0;
  for (int64_t c = 0; c < w; ++c) acc[c] = 0;
  for (int64_t j = 0; j < n; ++j) {
    const T* gr = g + j * inner;
    const T* yr = y + j * inner;
    if (log) {
#pragma omp simd
      for (int64_t c = 0; c < w; ++c) acc[c] += gr[c];
    } else {
#pragma omp simd
      for (int64_t c = 0; c < w; ++c) acc[c] += gr[c] * yr[c];
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    const T* gr = g + j * inner;
    const T* yr = y + j * inner;
    T* dr = dx + j * inner;
    if (log) {
#pragma omp simd
      for (int64_t c = 0; c < w; ++c) dr[c] = gr[c] - fast_exp(yr[c]) * acc[c];
    } else {
#pragma omp simd
      for (int64_t c = 0; c < w; ++c) dr[c] = yr[c] * (gr[c] - acc[c]);
    }
  }
}

template <class T>
STRATA_MULTIVERSION void softmax_kernel(const T* x, T* y, Layout l, bool log) {
  const bool parallel = l.outer * l.n * l.inner > kParallelThreshold;
  const int64_t slice = l.n * l.inner;
  if (l.inner == 1) {
#pragma omp parallel for if (parallel) schedule(static)
    for (int64_t o = 0; o < l.outer; ++o)
      strata_kernels::softmax_row<CpuRow>(x + o * slice, y + o * slice, static_cast<T*>(nullptr), l.n, log);
    return;
  }
  const int64_t chunks = (l.inner + kColumnChunk - 1) / kColumnChunk;
#pragma omp parallel for if (parallel) schedule(static)
  for (int64_t t = 0; t < l.outer * chunks; ++t) {
    const int64_t o = t / chunks, c0 = (t % chunks) * kColumnChunk;
    softmax_columns(x + o * slice, y + o * slice, l.n, l.inner, c0, std::min(l.inner, c0 + kColumnChunk), log);
  }
}

template <class T>
STRATA_MULTIVERSION void softmax_backward_kernel(const T* g, const T* y, T* dx, Layout l, bool log) {
  const bool parallel = l.outer * l.n * l.inner > kParallelThreshold;
  const int64_t slice = l.n * l.inner;
  if (l.inner == 1) {
#pragma omp parallel for if (parallel) schedule(static)
    for (int64_t o = 0; o < l.outer; ++o)
      strata_kernels::softmax_backward_row<CpuRow>(g + o * slice, y + o * slice, dx + o * slice, l.n, log);
    return;
  }
  const int64_t chunks = (l.inner + kColumnChunk - 1) / kColumnChunk;
#pragma omp parallel for if (parallel) schedule(static)
  for (int64_t t = 0; t < l.outer * chunks; ++t) {
    const int64_t o = t / chunks, c0 = (t % chunks) * kColumnChunk;
    softmax_backward_columns(g + o * slice, y + o * slice, dx + o * slice, l.n, l.inner, c0,
                             std::min(l.inner, c0 + kColumnChunk), log);
  }
}

// Last-dimension rows of 16-bit data (X, Y, G 16-bit; T float): row_softmax.h's functions.
template <class X, class T, class Y>
STRATA_MULTIVERSION void softmax_rows16(const X* x, T* y, Y* y16, int64_t rows, int64_t n, bool log) {
#pragma omp parallel for if (rows * n > kParallelThreshold) schedule(static)
  for (int64_t r = 0; r < rows; ++r) strata_kernels::softmax_row<CpuRow>(x + r * n, y + r * n, y16 + r * n, n, log);
}

template <class G, class T>
STRATA_MULTIVERSION void softmax_backward_rows16(const G* g, const T* y, G* dx, int64_t rows, int64_t n, bool log) {
#pragma omp parallel for if (rows * n > kParallelThreshold) schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    strata_kernels::softmax_backward_row<CpuRow>(g + r * n, y + r * n, dx + r * n, n, log);
}

}  // namespace

backend::SoftmaxOutputs softmax_last16(const Tensor& x, bool log) {
  const DType compute = row_compute_dtype(x.dtype());
  backend::SoftmaxOutputs r{empty(x.shape(), {.dtype = compute}), empty(x.shape(), {.dtype = x.dtype()})};
  if (x.numel() == 0) return r;
  const int64_t n = x.size(-1);
  dispatch_row_storage(x.dtype(), x.dtype(), log ? "log_softmax" : "softmax", [&]<class X, class T, class Y>() {
    if constexpr (strata_kernels::SeparateStorage<T, Y>::value)
      softmax_rows16(storage<const X>(x), r.probs.data<T>(), storage<Y>(r.out), x.numel() / n, n, log);
    else STRATA_FAIL("softmax_last16: ", x.dtype(), " data is not 16-bit");
  });
  return r;
}

Tensor softmax_backward_last16(const Tensor& grad, const Tensor& y, bool log) {
  Tensor dx = empty(grad.shape(), {.dtype = grad.dtype()});
  if (y.numel() == 0) return dx;
  const int64_t n = y.size(-1);
  dispatch_row_storage(
      grad.dtype(), grad.dtype(), log ? "log_softmax backward" : "softmax backward", [&]<class G, class T, class>() {
        softmax_backward_rows16(storage<const G>(grad), y.data<T>(), storage<G>(dx), y.numel() / n, n, log);
      });
  return dx;
}

Tensor softmax_forward(const Tensor& x, int64_t dim, bool log) {
  Tensor out = empty_like(x);
  if (x.numel() == 0) return out;
  const Layout l = layout_of(x.shape(), dim);
  detail::dispatch_floating(x.dtype(), log ? "log_softmax" : "softmax",
                            [&]<class T>() { softmax_kernel(x.data<T>(), out.data<T>(), l, log); });
  return out;
}

Tensor softmax_backward(const Tensor& grad, const Tensor& out, int64_t dim, bool log) {
  Tensor dx = empty_like(out);
  if (out.numel() == 0) return dx;
  const Layout l = layout_of(out.shape(), dim);
  detail::dispatch_floating(out.dtype(), log ? "log_softmax backward" : "softmax backward", [&]<class T>() {
    softmax_backward_kernel(grad.data<T>(), out.data<T>(), dx.data<T>(), l, log);
  });
  return dx;
}

namespace {

template <class X, class T, class Y>
STRATA_MULTIVERSION void attention_softmax_kernel(const X* s, T* p, Y* p16, int64_t rows, int64_t tq, int64_t tk,
                                                  T scale, bool causal) {
#pragma omp parallel for if (rows * tk > kParallelThreshold) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t valid = strata_kernels::attention_valid_keys(r, tq, tk, causal);
    strata_kernels::prefix_softmax_row<CpuRow>(s + r * tk, p + r * tk, p16 == nullptr ? p16 : p16 + r * tk, tk, valid,
                                               scale);
  }
}

template <class G, class T>
STRATA_MULTIVERSION void attention_softmax_backward_kernel(const G* g, const T* p, G* dx, int64_t rows, int64_t tq,
                                                           int64_t tk, T scale, bool causal) {
#pragma omp parallel for if (rows * tk > kParallelThreshold) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t valid = strata_kernels::attention_valid_keys(r, tq, tk, causal);
    strata_kernels::prefix_softmax_backward_row<CpuRow>(g + r * tk, p + r * tk, dx + r * tk, tk, valid, scale);
  }
}

}  // namespace

backend::SoftmaxOutputs attention_softmax_forward(const Tensor& scores, double scale, bool causal, DType out_dtype) {
  const DType compute = row_compute_dtype(scores.dtype());
  backend::SoftmaxOutputs r{empty(scores.shape(), {.dtype = compute}), Tensor()};
  r.out = out_dtype == compute ? r.probs : empty(scores.shape(), {.dtype = out_dtype});
  if (scores.numel() == 0) return r;
  const int64_t tq = scores.size(-2), tk = scores.size(-1);
  dispatch_row_storage(scores.dtype(), out_dtype, "attention softmax", [&]<class X, class T, class Y>() {
    Y* p16 = out_dtype == compute ? nullptr : storage<Y>(r.out);
    attention_softmax_kernel(storage<const X>(scores), r.probs.data<T>(), p16, scores.numel() / tk, tq, tk,
                             static_cast<T>(scale), causal);
  });
  return r;
}

Tensor attention_softmax_backward(const Tensor& grad, const Tensor& probs, double scale, bool causal) {
  Tensor dx = empty(grad.shape(), {.dtype = grad.dtype()});
  if (probs.numel() == 0) return dx;
  const int64_t tq = probs.size(-2), tk = probs.size(-1);
  dispatch_row_storage(grad.dtype(), grad.dtype(), "attention softmax backward", [&]<class G, class T, class>() {
    attention_softmax_backward_kernel(storage<const G>(grad), probs.data<T>(), storage<G>(dx), probs.numel() / tk, tq,
                                      tk, static_cast<T>(scale), causal);
  });
  return dx;
}

namespace {

template <class I>
int64_t check_targets(const I* t, int64_t n, int64_t classes, int64_t ignore_index) {
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = static_cast<int64_t>(t[i]);
    if (v == ignore_index) continue;
    STRATA_CHECK(v >= 0 && v < classes, "cross_entropy: target ", v, " at position ", i,
                 " is out of range for logits with ", classes, " classes (expected [0, ", classes, ") or ignore_index ",
                 ignore_index, ")");
    ++count;
  }
  return count;
}

template <class F>
decltype(auto) dispatch_index(const Tensor& targets, F&& f) {
  if (targets.dtype() == DType::Int32) return f(targets.data<int32_t>());
  return f(targets.data<int64_t>());
}

// Per row: stats = (max, log sum exp(x - max)), loss = logsumexp - x[target].
template <class X, class T, class I>
STRATA_MULTIVERSION void cross_entropy_kernel(const X* x, const I* targets, int64_t rows, int64_t cols, int64_t classes,
                                              int64_t ignore_index, T* stats, double* row_loss) {
#pragma omp parallel for if (rows * classes > kParallelThreshold) schedule(static)
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t target = static_cast<int64_t>(targets[i]);
    if (target == ignore_index) {
      stats[2 * i] = stats[2 * i + 1] = 0;
      row_loss[i] = 0;
      continue;
    }
    row_loss[i] = strata_kernels::cross_entropy_row<CpuRow>(x + i * cols, classes, target, stats + 2 * i);
  }
}

// dx = exp(x - logsumexp) * coef - coef * onehot(target); zero rows for ignored targets and
// zero padding columns (those past `classes`).
template <class X, class T, class I>
STRATA_MULTIVERSION void cross_entropy_backward_kernel(const X* x, const I* targets, const T* stats, int64_t rows,
                                                       int64_t cols, int64_t classes, int64_t ignore_index, T coef,
                                                       X* dx) {
#pragma omp parallel for if (rows * cols > kParallelThreshold) schedule(static)
  for (int64_t i = 0; i < rows; ++i) {
    X* drow = dx + i * cols;
    const int64_t target = static_cast<int64_t>(targets[i]);
    if (target == ignore_index) {
      for (int64_t j = 0; j < cols; ++j) strata_kernels::store(drow[j], T(0));
      continue;
    }
    strata_kernels::cross_entropy_backward_row<CpuRow>(x + i * cols, classes, cols, target, stats + 2 * i, coef, drow);
  }
}

}  // namespace

CrossEntropyResult cross_entropy_forward(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                                         int64_t classes) {
  const int64_t rows = logits.size(0), cols = logits.size(1);
  const DType compute = row_compute_dtype(logits.dtype());
  CrossEntropyResult r;
  r.stats = empty({rows, 2}, {.dtype = compute});
  r.count = dispatch_index(targets, [&](const auto* t) { return check_targets(t, rows, classes, ignore_index); });
  Tensor row_loss = empty({rows}, {.dtype = DType::Float64});
  const double* pl = row_loss.data<double>();
  dispatch_row_storage(logits.dtype(), logits.dtype(), "cross_entropy", [&]<class X, class T, class>() {
    dispatch_index(targets, [&](const auto* t) {
      cross_entropy_kernel(storage<const X>(logits), t, rows, cols, classes, ignore_index, r.stats.data<T>(),
                           row_loss.data<double>());
    });
  });
  // In the row order (row_reduce.h) over the rows' losses: independent of the number of
  // threads, and what the GPU's warp computes.
  const double total = CpuRow::sum(rows, [&](int64_t i) { return pl[i]; });
  r.loss = scalar_tensor(r.count > 0 ? total / static_cast<double>(r.count) : 0.0, {.dtype = compute});
  return r;
}

Tensor cross_entropy_backward(const Tensor& grad_loss, const Tensor& logits, const Tensor& targets, const Tensor& stats,
                              int64_t ignore_index, int64_t count, int64_t classes) {
  const int64_t rows = logits.size(0), cols = logits.size(1);
  Tensor dx = empty_like(logits);
  const double coef = count > 0 ? grad_loss.item() / static_cast<double>(count) : 0.0;
  dispatch_row_storage(logits.dtype(), logits.dtype(), "cross_entropy backward", [&]<class X, class T, class>() {
    dispatch_index(targets, [&](const auto* t) {
      cross_entropy_backward_kernel(storage<const X>(logits), t, stats.data<T>(), rows, cols, classes, ignore_index,
                                    static_cast<T>(coef), storage<X>(dx));
    });
  });
  return dx;
}

}  // namespace strata::cpu
