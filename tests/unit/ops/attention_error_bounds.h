#pragma once
// Derived float32 error bounds (tests/float32_error_bound.h) of strata's CPU attention
// (src/backend/cpu/attention.cpp), stage by stage:
//   S = scale Q K^T (GEMM, alpha = float(scale)), S += mask, P = softmax over each row's
//   visible keys (float32 sum), O = P V (GEMM);
//   dP = dO V^T, dS = P (dP - float32 sum P dP), dQ = scale dS K, dK = scale sum over the
//   kv group of dS^T Q, dV = sum over the group of P^T dO (GEMMs accumulating with beta 1).
// Every stage carries the error its inputs bring and adds its own roundings, so the bound on
// O, dQ, dK, dV holds for any GEMM kernel and any ISA version of the softmax loops.
#include <algorithm>
#include <cmath>
#include <vector>

#include "float32_error_bound.h"

namespace strata::test {

struct AttentionGeometry {
  size_t batch, heads, kv_heads, tq, tk, d;
  bool causal;
  size_t keys(size_t i) const { return causal ? tk - tq + i + 1 : tk; }  // keys query i sees
};

struct AttentionBounds {
  std::vector<Bounded> out, dq, dk, dv;
};

namespace attention_bounds_detail {

// Dot product with k_extra more float32 accumulations (beta = 1 into C) than dot() covers.
inline Bounded gemm_entry(const std::vector<Bounded>& a, const std::vector<Bounded>& b, double alpha, size_t extra) {
  Bounded r = dot(a, b, alpha);
  double magnitude = 0;
  for (size_t k = 0; k < a.size(); ++k) magnitude += (std::fabs(a[k].v) + a[k].e) * (std::fabs(b[k].v) + b[k].e);
  r.e += (gamma32(static_cast<double>(a.size() + 2 + extra)) - gamma32(static_cast<double>(a.size() + 2))) *
         std::fabs(alpha) * magnitude;
  // alpha itself is float(scale): relative error u on the whole product.
  if (alpha != 1) r.e += kUnitRoundoff32 * (std::fabs(r.v) + r.e);
  return r;
}

// P for one (batch, head): rows of tk, zero beyond each row's visible keys.
inline std::vector<Bounded> probabilities(const std::vector<double>& q, const std::vector<double>& k,
                                          const std::vector<double>& mask, const AttentionGeometry& g, size_t qoff,
                                          size_t koff, double scale) {
  std::vector<Bounded> p(g.tq * g.tk);
  std::vector<Bounded> qi(g.d), kj(g.d);
  for (size_t i = 0; i < g.tq; ++i) {
    const size_t len = g.keys(i);
    for (size_t c = 0; c < g.d; ++c) qi[c] = exact(q[qoff + i * g.d + c]);
    std::vector<Bounded> s(len), t(len);
    Bounded m{-INFINITY, 0};
    for (size_t j = 0; j < len; ++j) {
      for (size_t c = 0; c < g.d; ++c) kj[c] = exact(k[koff + j * g.d + c]);
      s[j] = gemm_entry(qi, kj, scale, 0);
      if (!mask.empty()) s[j] = add(s[j], exact(mask[i * g.tk + j]));
      m = {std::max(m.v, s[j].v), std::max(m.e, s[j].e)};  // the computed max is within max e
    }
    for (size_t j = 0; j < len; ++j) t[j] = fast_exp(sub(s[j], m));
    const Bounded inv = reciprocal(sum(t));
    for (size_t j = 0; j < len; ++j) p[i * g.tk + j] = mul(t[j], inv);
  }
  return p;
}

}  // namespace attention_bounds_detail

// q [B, H, Tq, D], k and v [B, KVH, Tk, D], mask [Tq, Tk] (shared by every batch and head;
// empty for none), grad_out [B, H, Tq, D]; all contiguous float32 values.
inline AttentionBounds attention_bounds(const std::vector<double>& q, const std::vector<double>& k,
                                        const std::vector<double>& v, const std::vector<double>& mask,
                                        const std::vector<double>& grad_out, const AttentionGeometry& g) {
  using namespace attention_bounds_detail;
  const double scale = 1 / std::sqrt(static_cast<double>(g.d));
  const size_t group = g.heads / g.kv_heads, qs = g.tq * g.d, ks = g.tk * g.d;
  AttentionBounds r{std::vector<Bounded>(q.size()), std::vector<Bounded>(q.size()), std::vector<Bounded>(k.size()),
                    std::vector<Bounded>(v.size())};
  for (size_t b = 0; b < g.batch; ++b)
    for (size_t kvh = 0; kvh < g.kv_heads; ++kvh) {
      const size_t koff = (b * g.kv_heads + kvh) * ks;
      // dK and dV: per key j and feature c, the terms over the group's query heads and rows.
      std::vector<std::vector<Bounded>> dk_a(g.tk), dk_b(g.tk * g.d), dv_a(g.tk), dv_b(g.tk * g.d);
      for (size_t h = kvh * group; h < (kvh + 1) * group; ++h) {
        const size_t qoff = (b * g.heads + h) * qs;
        const std::vector<Bounded> p = probabilities(q, k, mask, g, qoff, koff, scale);
        std::vector<Bounded> row, col(g.tk), go(g.d), vj(g.d);
        for (size_t i = 0; i < g.tq; ++i) {
          const size_t len = g.keys(i);
          row.assign(p.begin() + static_cast<std::ptrdiff_t>(i * g.tk),
                     p.begin() + static_cast<std::ptrdiff_t>(i * g.tk + len));
          for (size_t c = 0; c < g.d; ++c) {
            for (size_t j = 0; j < len; ++j) col[j] = exact(v[koff + j * g.d + c]);
            r.out[qoff + i * g.d + c] =
                gemm_entry(row, {col.begin(), col.begin() + static_cast<std::ptrdiff_t>(len)}, 1, 0);
            go[c] = exact(grad_out[qoff + i * g.d + c]);
          }
          // dS for row i.
          std::vector<Bounded> dp(len), pdp(len), ds(len);
          for (size_t j = 0; j < len; ++j) {
            for (size_t c = 0; c < g.d; ++c) vj[c] = exact(v[koff + j * g.d + c]);
            dp[j] = gemm_entry(go, vj, 1, 0);
            pdp[j] = mul(row[j], dp[j]);
          }
          const Bounded total = sum(pdp);
          for (size_t j = 0; j < len; ++j) ds[j] = mul(row[j], sub(dp[j], total));
          for (size_t c = 0; c < g.d; ++c) {
            for (size_t j = 0; j < len; ++j) col[j] = exact(k[koff + j * g.d + c]);
            r.dq[qoff + i * g.d + c] =
                gemm_entry(ds, {col.begin(), col.begin() + static_cast<std::ptrdiff_t>(len)}, scale, 0);
          }
          for (size_t j = 0; j < len; ++j) {
            dk_a[j].push_back(ds[j]);
            dv_a[j].push_back(row[j]);
            for (size_t c = 0; c < g.d; ++c) {
              dk_b[j * g.d + c].push_back(exact(q[qoff + i * g.d + c]));
              dv_b[j * g.d + c].push_back(go[c]);
            }
          }
        }
      }
      for (size_t j = 0; j < g.tk; ++j)
        for (size_t c = 0; c < g.d; ++c) {
          r.dk[koff + j * g.d + c] = gemm_entry(dk_a[j], dk_b[j * g.d + c], scale, group);
          r.dv[koff + j * g.d + c] = gemm_entry(dv_a[j], dv_b[j * g.d + c], 1, group);
        }
    }
  return r;
}

}  // namespace strata::test
