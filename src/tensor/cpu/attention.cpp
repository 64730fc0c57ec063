#include "attention.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/fast_math.h"
#include "dtype_dispatch.h"
#include "multiversion.h"
#include "strata/tensor/factory.h"

namespace strata::cpu {
namespace {

using strata_kernels::fast_exp;

// Rows per block: the products for a block of rows [i0, i1) only reach keys [0, i1), so
// about (n + 1) / 2n of the full T x T work is done for n blocks. Smaller blocks skip more
// but make smaller, less efficient GEMMs; 64 measured best for T 256..1024, D 64.
int64_t block_rows(int64_t t) { return t <= 128 ? t : 64; }

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
          int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(ldc));
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(ldc));
}

// One [T, D] slice of a [B, H, T, D] operand.
template <class T>
struct Operand {
  T* base;
  int64_t sb, sh, ld;
  int64_t heads;
  T* at(int64_t bh) const { return base + (bh / heads) * sb + (bh % heads) * sh; }
};

template <class T>
Operand<T> operand(const Tensor& t) {
  // ld only matters when there are several rows; BLAS wants it >= D in any case.
  const int64_t ld = t.size(2) > 1 ? t.stride(2) : t.size(3);
  return Operand<T>{static_cast<T*>(t.raw_data()), t.stride(0), t.stride(1), std::max<int64_t>(ld, 1), t.size(1)};
}

// Softmax of rows [i0, i1) of s (row stride ld) over keys j <= i, in place; entries
// (i, i1) are zeroed so that block products that read them add nothing.
template <class T>
STRATA_MULTIVERSION void causal_softmax_rows(T* s, int64_t ld, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; ++i) {
    T* row = s + i * ld;
    const int64_t len = i + 1;
    T m = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < len; ++j) m = row[j] > m ? row[j] : m;
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < len; ++j) {
      const T e = fast_exp(row[j] - m);
      row[j] = e;
      sum += e;
    }
    const T inv = T(1) / sum;
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) row[j] *= inv;
    std::fill(row + len, row + i1, T(0));
  }
}

// dS = P * (dP - rowsum(dP * P)) for rows [i0, i1), in place over dP; zero above the
// diagonal up to i1.
template <class T>
STRATA_MULTIVERSION void softmax_grad_rows(const T* p, T* ds, int64_t ld, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; ++i) {
    const T* pr = p + i * ld;
    T* dr = ds + i * ld;
    const int64_t len = i + 1;
    T dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < len; ++j) dot += pr[j] * dr[j];
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) dr[j] = pr[j] * (dr[j] - dot);
    std::fill(dr + len, dr + i1, T(0));
  }
}

}  // namespace

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& probs) {
  const int64_t batch = q.size(0), heads = q.size(1), t = q.size(2), d = q.size(3);
  const int64_t bh_count = batch * heads;
  if (bh_count == 0 || t == 0 || d == 0) return;
  const int threads = bh_count > 1 ? std::max(1, omp_get_max_threads()) : 1;
  Tensor scratch = probs.defined() ? Tensor() : empty({threads, t, t}, {.dtype = q.dtype()});
  const int64_t bs = block_rows(t);
  detail::dispatch_floating(q.dtype(), "causal_attention", [&]<class T>() {
    const Operand<T> oq = operand<T>(q), ok = operand<T>(k), ov = operand<T>(v), oo = operand<T>(out);
    T* pp = probs.defined() ? probs.data<T>() : scratch.data<T>();
    const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(d)));
    // Each (b, h) runs its GEMMs single-threaded: OpenBLAS (OpenMP build) does not fork
    // inside a parallel region, which is what small per-head products want.
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t bh = 0; bh < bh_count; ++bh) {
      const T* qs = oq.at(bh);
      const T* ks = ok.at(bh);
      const T* vs = ov.at(bh);
      T* os = oo.at(bh);
      T* p = probs.defined() ? pp + bh * t * t : pp + static_cast<int64_t>(omp_get_thread_num()) * t * t;
      for (int64_t i0 = 0; i0 < t; i0 += bs) {
        const int64_t i1 = std::min(t, i0 + bs), m = i1 - i0;
        gemm(false, true, m, i1, d, scale, qs + i0 * oq.ld, oq.ld, ks, ok.ld, T(0), p + i0 * t, t);
        causal_softmax_rows(p, t, i0, i1);
        gemm(false, false, m, d, i1, T(1), p + i0 * t, t, vs, ov.ld, T(0), os + i0 * oo.ld, oo.ld);
      }
    }
  });
}

void attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& probs, const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  const int64_t batch = q.size(0), heads = q.size(1), t = q.size(2), d = q.size(3);
  const int64_t bh_count = batch * heads;
  if (bh_count == 0 || t == 0 || d == 0) return;
  const bool need_q = dq.defined(), need_k = dk.defined(), need_v = dv.defined();
  const bool need_ds = need_q || need_k;
  const int threads = bh_count > 1 ? std::max(1, omp_get_max_threads()) : 1;
  Tensor scratch = need_ds ? empty({threads, t, t}, {.dtype = q.dtype()}) : Tensor();
  const int64_t bs = block_rows(t);
  detail::dispatch_floating(q.dtype(), "causal_attention backward", [&]<class T>() {
    const Operand<T> oq = operand<T>(q), ok = operand<T>(k), ov = operand<T>(v), og = operand<T>(grad_out);
    const Operand<T> odq = need_q ? operand<T>(dq) : Operand<T>{}, odk = need_k ? operand<T>(dk) : Operand<T>{},
                     odv = need_v ? operand<T>(dv) : Operand<T>{};
    const T* pp = probs.data<T>();
    T* pscratch = need_ds ? scratch.data<T>() : nullptr;
    const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(d)));
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t bh = 0; bh < bh_count; ++bh) {
      const T* qs = oq.at(bh);
      const T* ks = ok.at(bh);
      const T* vs = ov.at(bh);
      const T* gs = og.at(bh);
      const T* p = pp + bh * t * t;
      T* ds = need_ds ? pscratch + static_cast<int64_t>(omp_get_thread_num()) * t * t : nullptr;
      if (need_ds) {
        for (int64_t i0 = 0; i0 < t; i0 += bs) {
          const int64_t i1 = std::min(t, i0 + bs), m = i1 - i0;
          gemm(false, true, m, i1, d, T(1), gs + i0 * og.ld, og.ld, vs, ov.ld, T(0), ds + i0 * t, t);  // dP
          softmax_grad_rows(p, ds, t, i0, i1);
          if (need_q) {
            gemm(false, false, m, d, i1, scale, ds + i0 * t, t, ks, ok.ld, T(0), odq.at(bh) + i0 * odq.ld, odq.ld);
          }
        }
      }
      // Column blocks [j0, j1) of P and dS get contributions from rows i >= j0 only.
      for (int64_t j0 = 0; j0 < t; j0 += bs) {
        const int64_t j1 = std::min(t, j0 + bs), m = j1 - j0, rows = t - j0;
        if (need_v) {
          gemm(true, false, m, d, rows, T(1), p + j0 * t + j0, t, gs + j0 * og.ld, og.ld, T(0),
               odv.at(bh) + j0 * odv.ld, odv.ld);
        }
        if (need_k) {
          gemm(true, false, m, d, rows, scale, ds + j0 * t + j0, t, qs + j0 * oq.ld, oq.ld, T(0),
               odk.at(bh) + j0 * odk.ld, odk.ld);
        }
      }
    }
  });
}

}  // namespace strata::cpu
