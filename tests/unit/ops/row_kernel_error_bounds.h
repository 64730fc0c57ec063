#pragma once
// Derived float32 error bounds (tests/float32_error_bound.h) of strata's row kernels, stage by
// stage as strata_kernels/common/row_softmax.h and row_norms.h compute them: row sums accumulated in
// double and rounded to float32 once, elementwise steps in float32, exp by fast_exp. Inputs
// are the float32 inputs' values (exact); rows of n values, row-major.
#include <algorithm>
#include <vector>

#include "float32_error_bound.h"

namespace strata::test {

namespace row_bounds_detail {
inline std::vector<Bounded> row_of(const std::vector<Bounded>& v, size_t r, size_t n) {
  return {v.begin() + static_cast<std::ptrdiff_t>(r * n), v.begin() + static_cast<std::ptrdiff_t>((r + 1) * n)};
}
inline double row_max(const std::vector<double>& x, size_t r, size_t n) {
  return *std::max_element(x.begin() + static_cast<std::ptrdiff_t>(r * n),
                           x.begin() + static_cast<std::ptrdiff_t>((r + 1) * n));
}
// A double sum rounded to float32, as the row kernels store it.
inline Bounded sum_to_float(const std::vector<Bounded>& terms) { return rounded(sum(terms, kUnitRoundoff64)); }
}  // namespace row_bounds_detail

// softmax: t = fast_exp(x - m), s = sum t (double), y = t * float(1 / s).
// log_softmax: y = (x - m) - float(log sum t).
inline std::vector<Bounded> softmax_bounds(const std::vector<double>& x, size_t n, bool log) {
  using namespace row_bounds_detail;
  std::vector<Bounded> y(x.size());
  for (size_t r = 0; r < x.size() / n; ++r) {
    const Bounded m = exact(row_max(x, r, n));
    std::vector<Bounded> shifted(n), t(n);
    for (size_t j = 0; j < n; ++j) {
      shifted[j] = sub(exact(x[r * n + j]), m);
      t[j] = fast_exp(shifted[j]);
    }
    const Bounded s = sum(t, kUnitRoundoff64);
    const Bounded ls = rounded(log_of(s)), inv = rounded(reciprocal(s, kUnitRoundoff64));
    for (size_t j = 0; j < n; ++j) y[r * n + j] = log ? sub(shifted[j], ls) : mul(t[j], inv);
  }
  return y;
}

// Their gradients from the float32 forward y^ (bounded by y) and the incoming g:
// softmax dx = y (g - float(sum g y)); log_softmax dx = g - fast_exp(y) float(sum g).
inline std::vector<Bounded> softmax_backward_bounds(const std::vector<double>& g, const std::vector<Bounded>& y,
                                                    size_t n, bool log) {
  using namespace row_bounds_detail;
  std::vector<Bounded> dx(g.size());
  for (size_t r = 0; r < g.size() / n; ++r) {
    std::vector<Bounded> terms(n);
    for (size_t j = 0; j < n; ++j)
      terms[j] = log ? exact(g[r * n + j]) : mul(exact(g[r * n + j]), y[r * n + j], kUnitRoundoff64);
    const Bounded total = sum_to_float(terms);
    for (size_t j = 0; j < n; ++j) {
      const Bounded gj = exact(g[r * n + j]);
      dx[r * n + j] = log ? sub(gj, mul(fast_exp(y[r * n + j]), total)) : mul(y[r * n + j], sub(gj, total));
    }
  }
  return dx;
}

// cross_entropy's mean loss over rows (every target counted): per row log(sum fast_exp(x - m))
// - (x_t - m) in double, the mean in double, rounded to float32.
inline Bounded cross_entropy_bound(const std::vector<double>& x, size_t n, const std::vector<int64_t>& targets) {
  using namespace row_bounds_detail;
  std::vector<Bounded> losses;
  for (size_t r = 0; r < targets.size(); ++r) {
    const double m = row_max(x, r, n);
    std::vector<Bounded> t(n);
    for (size_t j = 0; j < n; ++j) t[j] = fast_exp(sub(exact(x[r * n + j]), exact(m)));
    const Bounded x_t = exact(x[r * n + static_cast<size_t>(targets[r])] - m);  // double: exact
    losses.push_back(sub(log_of(sum(t, kUnitRoundoff64)), x_t, kUnitRoundoff64));
  }
  const Bounded total = sum(losses, kUnitRoundoff64);
  const double count = static_cast<double>(losses.size());
  return rounded(rounded({total.v / count, total.e / count}, kUnitRoundoff64));
}

// Its gradient for an incoming 1: c = float(1 / count), p = fast_exp((x - m) - float(lse - m)) c,
// dx = p - c at the target.
inline std::vector<Bounded> cross_entropy_backward_bounds(const std::vector<double>& x, size_t n,
                                                          const std::vector<int64_t>& targets) {
  using namespace row_bounds_detail;
  std::vector<Bounded> dx(x.size());
  const Bounded c = rounded(exact(1.0 / static_cast<double>(targets.size())));
  for (size_t r = 0; r < targets.size(); ++r) {
    const Bounded m = exact(row_max(x, r, n));
    std::vector<Bounded> t(n);
    for (size_t j = 0; j < n; ++j) t[j] = fast_exp(sub(exact(x[r * n + j]), m));
    const Bounded ls = rounded(log_of(sum(t, kUnitRoundoff64)));
    for (size_t j = 0; j < n; ++j) {
      const Bounded p = mul(fast_exp(sub(sub(exact(x[r * n + j]), m), ls)), c);
      dx[r * n + j] = j == static_cast<size_t>(targets[r]) ? sub(p, c) : p;
    }
  }
  return dx;
}

}  // namespace strata::test

namespace strata::test {

// Row statistics of layer_norm and rms_norm: double sums of the float32 inputs, the results
// rounded to float32 (the kernels keep mean and rstd in T).
struct NormRowBounds {
  std::vector<Bounded> mean, rstd;
};

struct NormBounds {
  std::vector<Bounded> y;
  NormRowBounds stats;
};

// layer_norm: mu = sum x / d, var = sum (x - mu)^2 / d (both double), y = (x - mu) rstd w + b.
// rms_norm (no bias, `rms`): rstd = 1 / sqrt(sum x^2 / d + eps), y = x rstd w.
inline NormBounds norm_bounds(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
                              double eps, bool rms) {
  const size_t d = w.size(), rows = x.size() / d;
  const Bounded inv_d = rounded(exact(1.0 / static_cast<double>(d)), kUnitRoundoff64);
  NormBounds out{std::vector<Bounded>(x.size()), {std::vector<Bounded>(rows), std::vector<Bounded>(rows)}};
  for (size_t r = 0; r < rows; ++r) {
    std::vector<Bounded> xs(d), sq(d);
    for (size_t j = 0; j < d; ++j) xs[j] = exact(x[r * d + j]);
    const Bounded mu = rms ? exact(0) : mul(sum(xs, kUnitRoundoff64), inv_d, kUnitRoundoff64);
    for (size_t j = 0; j < d; ++j) {
      const Bounded c = rms ? xs[j] : sub(xs[j], mu, kUnitRoundoff64);
      sq[j] = mul(c, c, kUnitRoundoff64);
    }
    const Bounded var = mul(sum(sq, kUnitRoundoff64), inv_d, kUnitRoundoff64);
    const Bounded mu_t = rounded(mu), rs_t = rounded(rsqrt_of(add(var, exact(eps), kUnitRoundoff64)));
    out.stats.mean[r] = mu_t;
    out.stats.rstd[r] = rs_t;
    for (size_t j = 0; j < d; ++j) {
      const Bounded wj = exact(w[j]);
      out.y[r * d + j] = rms ? mul(mul(xs[j], rs_t), wj) : add(mul(mul(sub(xs[j], mu_t), rs_t), wj), exact(b[j]));
    }
  }
  return out;
}

struct NormGradBounds {
  std::vector<Bounded> dx, dw;
};

// Their gradients for an incoming g, from the forward's float32 statistics:
// layer_norm dx = rstd (g w - a - xhat c), a = float(sum g w / d), c = float(sum g w xhat / d),
//   xhat = (x - mean) rstd, dw = sum over rows of g xhat (float32, any order);
// rms_norm dx = rstd g w - x c, c = float(rstd^3 sum (g w) x / d), dw = sum g x rstd.
inline NormGradBounds norm_backward_bounds(const std::vector<double>& g, const std::vector<double>& x,
                                           const std::vector<double>& w, const NormRowBounds& stats, bool rms) {
  const size_t d = w.size(), rows = x.size() / d;
  const Bounded inv_d = rounded(exact(1.0 / static_cast<double>(d)), kUnitRoundoff64);
  NormGradBounds out{std::vector<Bounded>(x.size()), std::vector<Bounded>(d)};
  std::vector<std::vector<Bounded>> dw_terms(d);
  for (size_t r = 0; r < rows; ++r) {
    const Bounded mean = stats.mean[r], rs = stats.rstd[r];
    std::vector<Bounded> gw(d), xhat(d), ta(d), tb(d);
    for (size_t j = 0; j < d; ++j) {
      const Bounded gj = exact(g[r * d + j]), xj = exact(x[r * d + j]);
      gw[j] = mul(gj, exact(w[j]));
      xhat[j] = rms ? xj : mul(sub(xj, mean), rs);
      ta[j] = gw[j];
      tb[j] = rms ? mul(gw[j], xj, kUnitRoundoff64) : mul(gw[j], xhat[j]);
      dw_terms[j].push_back(rms ? mul(mul(gj, xj), rs) : mul(gj, xhat[j]));
    }
    const Bounded sb = sum(tb, kUnitRoundoff64);
    if (rms) {
      const Bounded c = rounded(mul(mul(mul(mul(rs, rs, kUnitRoundoff64), rs, kUnitRoundoff64), sb, kUnitRoundoff64),
                                    inv_d, kUnitRoundoff64));
      for (size_t j = 0; j < d; ++j) out.dx[r * d + j] = sub(mul(rs, gw[j]), mul(xhat[j], c));
    } else {
      const Bounded a = rounded(mul(sum(ta, kUnitRoundoff64), inv_d, kUnitRoundoff64));
      const Bounded c = rounded(mul(sb, inv_d, kUnitRoundoff64));
      for (size_t j = 0; j < d; ++j) out.dx[r * d + j] = mul(rs, sub(sub(gw[j], a), mul(xhat[j], c)));
    }
  }
  for (size_t j = 0; j < d; ++j) out.dw[j] = sum(dw_terms[j]);
  return out;
}

}  // namespace strata::test
