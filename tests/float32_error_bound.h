#pragma once
// Worst-case bounds on a float32 kernel's error, derived from the data by running error
// analysis (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., ch. 3): a
// Bounded holds the exact value v of a stage (computed in float64 from the float32 inputs)
// and a bound e on |v^ - v|, v^ being what the float32 kernel computes there. Each
// operation adds the error its inputs carry into it and its own rounding; sums take
// Higham's gamma_n bound, which holds for every order of the additions. So the bound holds
// for any vector width, FMA contraction (one rounding instead of two is covered), thread
// split and GEMM kernel: strata's ISA versions and every OpenBLAS core type alike.
// docs/testing.md "Bounds".
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "float32_bound.h"

namespace strata::test {

struct Bounded {
  double v = 0;  // exact value
  double e = 0;  // bound on the float32 kernel's |computed - v|
};

inline constexpr double kUnitRoundoff64 = 0x1p-53;
// Absolute error of a rounding into float32's subnormal range (half its smallest step, doubled
// for slack): products of tiny probabilities lose relative accuracy there.
inline constexpr double kUnderflow32 = 0x1p-149;

// Worst-case relative error of strata_kernels::fast_exp (strata_kernels/common/fast_math.h) for
// arguments above -87: r = x - n ln2 rounds once (|r| <= ln2/2: 0.35u); the degree-7 Horner
// polynomial errs by at most gamma_14 sum |c_k| |r|^k = gamma_14 e^|r| (Higham (5.3)), i.e.
// gamma_14 e^(2|r|) <= 2 gamma_14 relative to e^r; truncation < 1e-8 (0.17u); times 2^n is
// exact. 28.5u in all: 30u. Below -87.7 it returns 0 for a true value under 2^-126.
inline constexpr double kFastExpError = 30 * kUnitRoundoff32;
inline constexpr double kFastExpUnderflow = 0x1p-126;

// One rounding to float32 (unit u) or float64 of a value computed with error e:
// |fl(x^) - x^| <= u |x^| <= u (|v| + e).
inline Bounded rounded(Bounded a, double unit = kUnitRoundoff32) {
  return {a.v, a.e + unit * (std::fabs(a.v) + a.e) + (unit == kUnitRoundoff32 ? kUnderflow32 : 0.0)};
}
inline Bounded exact(double v) { return {v, 0}; }

// Arithmetic whose result is rounded to float32 (`unit` for float64 intermediates).
inline Bounded add(Bounded a, Bounded b, double unit = kUnitRoundoff32) {
  return rounded({a.v + b.v, a.e + b.e}, unit);
}
inline Bounded sub(Bounded a, Bounded b, double unit = kUnitRoundoff32) {
  return rounded({a.v - b.v, a.e + b.e}, unit);
}
inline Bounded mul(Bounded a, Bounded b, double unit = kUnitRoundoff32) {
  return rounded({a.v * b.v, std::fabs(a.v) * b.e + std::fabs(b.v) * a.e + a.e * b.e}, unit);
}
// 1 / a: |1/a^ - 1/a| <= e / (|a| (|a| - e)) while e < |a|.
inline Bounded reciprocal(Bounded a, double unit = kUnitRoundoff32) {
  const double m = std::fabs(a.v);
  return rounded({1 / a.v, a.e < m ? a.e / (m * (m - a.e)) : INFINITY}, unit);
}

// Sum of n computed terms, in any order: the terms' own errors plus gamma_{n-1} times the sum
// of their computed magnitudes (Higham (4.4)). `unit` is the accumulator's roundoff: float32
// loops, or the double accumulators of strata's row kernels (their result is then rounded to
// float32 by the caller where the kernel does).
inline Bounded sum(const std::vector<Bounded>& terms, double unit = kUnitRoundoff32) {
  double v = 0, e = 0, magnitude = 0;
  for (const Bounded& t : terms) {
    v += t.v;
    e += t.e;
    magnitude += std::fabs(t.v) + t.e;
  }
  const double n = static_cast<double>(terms.size());
  const double gamma = n > 1 ? (n - 1) * unit / (1 - (n - 1) * unit) : 0.0;
  return {v, e + gamma * magnitude + (unit == kUnitRoundoff32 ? n * kUnderflow32 : 0.0)};
}

// Dot product of rows computed in float32 (GEMM inner loops), any order, scaled by alpha
// (applied to the sum or to the terms): gamma_{n+2} of the magnitudes covers the n products,
// the n - 1 additions, alpha and a final accumulation into C.
inline Bounded dot(const std::vector<Bounded>& a, const std::vector<Bounded>& b, double alpha = 1) {
  double v = 0, e = 0, magnitude = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    v += a[k].v * b[k].v;
    e += std::fabs(a[k].v) * b[k].e + std::fabs(b[k].v) * a[k].e + a[k].e * b[k].e;
    magnitude += (std::fabs(a[k].v) + a[k].e) * (std::fabs(b[k].v) + b[k].e);
  }
  const double aa = std::fabs(alpha);
  return {alpha * v, aa * (e + gamma32(static_cast<double>(a.size()) + 2) * magnitude) + a.size() * kUnderflow32};
}

// fast_exp of a float32 argument a^: |e^a^ - e^a| <= e^a (e^e - 1), then fast_exp's own error.
inline Bounded fast_exp(Bounded a) {
  const double v = std::exp(a.v);
  return {v, v * std::expm1(a.e) + kFastExpError * v * std::exp(a.e) + kFastExpUnderflow};
}

// log of a positive double sum (glibc: within an ulp of double): |log a^ - log a| <=
// -log(1 - e / a). Not rounded to float32: the caller does where the kernel does.
inline Bounded log_of(Bounded a) {
  const double v = std::log(a.v);
  return {v, (a.e < a.v ? -std::log1p(-a.e / a.v) : INFINITY) + 2 * kUnitRoundoff64 * std::fabs(v)};
}

// 1 / sqrt(a) of a positive double (a^ >= a - e), in double: monotone, so the error is at
// most its change over [a - e, a + e], plus two double roundings.
inline Bounded rsqrt_of(Bounded a) {
  const double v = 1 / std::sqrt(a.v);
  return {v, (a.e < a.v ? 1 / std::sqrt(a.v - a.e) - v : INFINITY) + 4 * kUnitRoundoff64 * v};
}

inline std::vector<Bounded> exact_values(const std::vector<double>& v) {
  std::vector<Bounded> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = exact(v[i]);
  return out;
}

// Expects |got_i - want_i.v| <= want_i.e for every entry; prints the worst ratio difference /
// bound (grep "float32 error bound" in the test logs) and the largest bound relative to
// max |v| (how tight a check it is: a bug shows as an O(1) relative difference).
inline ::testing::AssertionResult within_error_bounds(const std::vector<double>& got, const std::vector<Bounded>& want,
                                                      const std::string& what) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << what << ": " << got.size() << " values against " << want.size()
                                         << " bounds";
  double worst = 0, scale = 0, widest = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::fabs(got[i] - want[i].v);
    const double r = want[i].e > 0 ? d / want[i].e : (d > 0 ? INFINITY : 0.0);
    if (!(r <= worst)) {
      worst = r;
      at = i;
    }
    scale = std::max(scale, std::fabs(want[i].v));
    widest = std::max(widest, want[i].e);
  }
  std::printf(
      "float32 error bound: %s: worst difference / bound %.3g (entry %zu); widest bound %.3g of max |value| %.3g\n",
      what.c_str(), worst, at, widest, scale);
  if (worst <= 1) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": entry " << at << " is " << got[at] << ", exact " << want[at].v
                                       << ", difference " << std::fabs(got[at] - want[at].v)
                                       << " exceeds the derived float32 error bound " << want[at].e;
}

}  // namespace strata::test
