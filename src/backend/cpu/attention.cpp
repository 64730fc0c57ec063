#include "backend/cpu/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/gemm_backend.h"
#include "backend/cpu/multiversion.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/common/fast_math.h"
#include "tensor/dtype_dispatch.h"

namespace strata::cpu {
namespace {

using strata_kernels::fast_exp;

// Rows per block: with a causal mask the products for a block of rows [i0, i1) only reach
// keys up to row i1 - 1's last, so about (n + 1) / 2n of the full work is done for n blocks.
// Smaller blocks skip more but make smaller, less efficient GEMMs. Measured with D 64, one
// thread (forward + backward): 32 best up to T 256 (T 128: 5.1 ms against 6.6 for one
// block), 64 from T 512.
int64_t block_rows(int64_t t) { return t <= 256 ? std::min<int64_t>(t, 32) : 64; }

// The [T, D] slices of a [B, H, T, D] operand.
template <class T>
struct Operand {
  T* base;
  int64_t sb, sh, ld;
  T* at(int64_t b, int64_t h) const { return base + b * sb + h * sh; }
};

template <class T>
Operand<T> operand(const Tensor& t) {
  // ld only matters when there are several rows; BLAS wants it >= D in any case.
  const int64_t ld = t.size(2) > 1 ? t.stride(2) : t.size(3);
  return Operand<T>{static_cast<T*>(t.raw_data()), t.stride(0), t.stride(1), std::max<int64_t>(ld, 1)};
}

// The rows of an additive [B, H, Tq, Tk] mask view; base null when there is none.
template <class T>
struct MaskRows {
  const T* base = nullptr;
  int64_t sb = 0, sh = 0, si = 0, sj = 0;
  const T* at(int64_t b, int64_t h) const { return base == nullptr ? nullptr : base + b * sb + h * sh; }
};

template <class T>
MaskRows<T> mask_rows(const Tensor& m) {
  if (!m.defined()) return {};
  return {static_cast<const T*>(m.raw_data()), m.stride(0), m.stride(1), m.stride(2), m.stride(3)};
}

struct Geometry {
  int64_t batch, heads, kv_heads, tq, tk, d;
  bool causal;
  int64_t group() const { return heads / kv_heads; }
  // Query i sees keys [0, keys(i)): with a causal mask it sits at position tk - tq + i.
  int64_t keys(int64_t i) const { return causal ? tk - tq + i + 1 : tk; }
};

Geometry geometry(const Tensor& q, const Tensor& k, bool causal) {
  return {q.size(0), q.size(1), k.size(1), q.size(2), k.size(2), q.size(3), causal};
}

// Calls f(j0, j1, r0) for blocks of keys [j0, j1) covering [0, tk), r0 the first query row
// that sees any of them. The blocks follow the row blocks (shifted by tk - tq), so every row
// from r0 on has its probabilities defined (zero-filled) up to j1.
template <class F>
void for_each_key_block(const Geometry& g, int64_t bs, F&& f) {
  if (!g.causal) {
    f(int64_t{0}, g.tk, int64_t{0});
    return;
  }
  const int64_t shift = g.tk - g.tq;
  if (shift > 0) f(int64_t{0}, shift, int64_t{0});
  for (int64_t i0 = 0; i0 < g.tq; i0 += bs) f(shift + i0, shift + std::min(g.tq, i0 + bs), i0);
}

// Rows [i0, i1) of the scores s (row stride ld, keys [0, end) computed): adds the mask row
// (if any) and takes the softmax over each row's visible keys in place; entries from there
// to `end` are zeroed so that block products that read them add nothing.
template <class T>
STRATA_MULTIVERSION void softmax_rows(T* s, int64_t ld, int64_t i0, int64_t i1, int64_t end, const Geometry& g,
                                      const T* mask, int64_t msi, int64_t msj) {
  for (int64_t i = i0; i < i1; ++i) {
    T* row = s + i * ld;
    const int64_t len = g.keys(i);
    if (mask != nullptr) {
      const T* mrow = mask + i * msi;
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) row[j] += mrow[j * msj];
    }
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
    std::fill(row + len, row + end, T(0));
  }
}

// dS = P * (dP - rowsum(dP * P)) for rows [i0, i1), in place over dP; zero from each row's
// visible keys up to `end`.
template <class T>
STRATA_MULTIVERSION void softmax_grad_rows(const T* p, T* ds, int64_t ld, int64_t i0, int64_t i1, int64_t end,
                                           const Geometry& g) {
  for (int64_t i = i0; i < i1; ++i) {
    const T* pr = p + i * ld;
    T* dr = ds + i * ld;
    const int64_t len = g.keys(i);
    T dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < len; ++j) dot += pr[j] * dr[j];
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) dr[j] = pr[j] * (dr[j] - dot);
    std::fill(dr + len, dr + end, T(0));
  }
}

int threads_for(int64_t units) { return units > 1 ? std::max(1, omp_get_max_threads()) : 1; }

}  // namespace

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& params,
                       const Tensor& out, const Tensor& probs) {
  const Geometry g = geometry(q, k, params.causal);
  const int64_t tq = g.tq, tk = g.tk, d = g.d, units = g.batch * g.heads;
  if (units == 0 || tq == 0 || d == 0) return;
  const int threads = threads_for(units);
  Tensor scratch = probs.defined() ? Tensor() : empty({threads, tq, tk}, {.dtype = q.dtype()});
  const int64_t bs = block_rows(tq);
  detail::dispatch_floating(q.dtype(), "attention", [&]<class T>() {
    const Operand<T> oq = operand<T>(q), ok = operand<T>(k), ov = operand<T>(v), oo = operand<T>(out);
    const MaskRows<T> mask = mask_rows<T>(params.mask);
    T* pp = probs.defined() ? probs.data<T>() : scratch.data<T>();
    const T scale = static_cast<T>(params.scale);
    // Each (b, h) runs its GEMMs single-threaded: neither OpenBLAS (OpenMP build) nor oneDNN
    // forks inside a parallel region, which is what small per-head products want.
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t u = 0; u < units; ++u) {
      const int64_t b = u / g.heads, h = u % g.heads, kvh = h / g.group();
      const T* qs = oq.at(b, h);
      const T* ks = ok.at(b, kvh);
      const T* vs = ov.at(b, kvh);
      const T* ms = mask.at(b, h);
      T* os = oo.at(b, h);
      T* p = probs.defined() ? pp + u * tq * tk : pp + static_cast<int64_t>(omp_get_thread_num()) * tq * tk;
      for (int64_t i0 = 0; i0 < tq; i0 += bs) {
        const int64_t i1 = std::min(tq, i0 + bs), m = i1 - i0, end = g.keys(i1 - 1);
        backend_gemm(false, true, m, end, d, scale, qs + i0 * oq.ld, oq.ld, ks, ok.ld, T(0), p + i0 * tk, tk);
        softmax_rows(p, tk, i0, i1, end, g, ms, mask.si, mask.sj);
        backend_gemm(false, false, m, d, end, T(1), p + i0 * tk, tk, vs, ov.ld, T(0), os + i0 * oo.ld, oo.ld);
      }
    }
  });
}

void attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& probs,
                        const AttentionParams& params, const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  const Geometry g = geometry(q, k, params.causal);
  const int64_t tq = g.tq, tk = g.tk, d = g.d, units = g.batch * g.kv_heads;
  const bool need_q = dq.defined(), need_k = dk.defined(), need_v = dv.defined();
  if (tq == 0) {  // no query: nothing reaches the keys
    for (Tensor t : {dk, dv}) {
      if (t.defined()) t.zero_();
    }
    return;
  }
  if (units == 0 || d == 0) return;
  const bool need_ds = need_q || need_k;
  const int threads = threads_for(units);
  Tensor scratch = need_ds ? empty({threads, tq, tk}, {.dtype = q.dtype()}) : Tensor();
  const int64_t bs = block_rows(tq);
  detail::dispatch_floating(q.dtype(), "attention backward", [&]<class T>() {
    const Operand<T> oq = operand<T>(q), ok = operand<T>(k), ov = operand<T>(v), og = operand<T>(grad_out);
    const Operand<T> odq = need_q ? operand<T>(dq) : Operand<T>{}, odk = need_k ? operand<T>(dk) : Operand<T>{},
                     odv = need_v ? operand<T>(dv) : Operand<T>{};
    const T* pp = probs.data<T>();
    T* pscratch = need_ds ? scratch.data<T>() : nullptr;
    const T scale = static_cast<T>(params.scale);
    // One task per kv head: its query heads run in turn and add into its dk and dv, so the
    // sum over the group needs no atomics and is deterministic.
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t u = 0; u < units; ++u) {
      const int64_t b = u / g.kv_heads, kvh = u % g.kv_heads;
      const T* ks = ok.at(b, kvh);
      const T* vs = ov.at(b, kvh);
      T* dks = need_k ? odk.at(b, kvh) : nullptr;
      T* dvs = need_v ? odv.at(b, kvh) : nullptr;
      T* ds = need_ds ? pscratch + static_cast<int64_t>(omp_get_thread_num()) * tq * tk : nullptr;
      for (int64_t r = 0; r < g.group(); ++r) {
        const int64_t h = kvh * g.group() + r;
        const T beta = r == 0 ? T(0) : T(1);
        const T* qs = oq.at(b, h);
        const T* gs = og.at(b, h);
        const T* p = pp + (b * g.heads + h) * tq * tk;
        if (need_ds) {
          for (int64_t i0 = 0; i0 < tq; i0 += bs) {
            const int64_t i1 = std::min(tq, i0 + bs), m = i1 - i0, end = g.keys(i1 - 1);
            // dP
            backend_gemm(false, true, m, end, d, T(1), gs + i0 * og.ld, og.ld, vs, ov.ld, T(0), ds + i0 * tk, tk);
            softmax_grad_rows(p, ds, tk, i0, i1, end, g);
            if (need_q) {
              backend_gemm(false, false, m, d, end, scale, ds + i0 * tk, tk, ks, ok.ld, T(0),
                           odq.at(b, h) + i0 * odq.ld, odq.ld);
            }
          }
        }
        for_each_key_block(g, bs, [&](int64_t j0, int64_t j1, int64_t r0) {
          const int64_t m = j1 - j0, rows = tq - r0;
          if (need_v) {
            backend_gemm(true, false, m, d, rows, T(1), p + r0 * tk + j0, tk, gs + r0 * og.ld, og.ld, beta,
                         dvs + j0 * odv.ld, odv.ld);
          }
          if (need_k) {
            backend_gemm(true, false, m, d, rows, scale, ds + r0 * tk + j0, tk, qs + r0 * oq.ld, oq.ld, beta,
                         dks + j0 * odk.ld, odk.ld);
          }
        });
      }
    }
  });
}

}  // namespace strata::cpu
