#pragma once
// Per-element bounds for the GPU tests where the GPU and the CPU are not bit-equal (the
// platform's exp or log, another summation order): each test derives |gpu - cpu| <= bound_i
// from the operations' rounding and writes the derivation beside it (docs/testing.md
// "Bounds"); these are the shared pieces.
//
// Rounding model (Higham, ch. 2-3): a correctly rounded operation returns x (1 + d),
// |d| <= u; k of them in a chain err by at most gamma(k) = k u / (1 - k u), relatively. A
// value y's ulp is at most 2u |y|. The library functions: CUDA's device exp and log in
// double err by at most 1 ulp (CUDA C Programming Guide, "Mathematical Functions", double
// precision table), and glibc's exp and log in double by at most 1 ulp (glibc manual,
// "Errors in Math Functions", x86_64), so each side's exp or log of a shared argument is
// within kLibraryUlps * 2u of the exact value, relatively, and the two within twice that.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "strata/strata.h"

namespace strata::testing {

inline constexpr double kLibraryUlps = 1;

// The unit roundoff of a floating dtype: 2^-24 (float32) or 2^-53 (float64).
inline double unit_roundoff(DType dtype) { return dtype == DType::Float32 ? 0x1p-24 : 0x1p-53; }

// Higham's gamma_k: the relative error bound of k chained roundings of unit roundoff u.
inline double gamma_k(double k, double u) { return k * u / (1 - k * u); }

// Relative bound of one library exp or log result against the exact value: kLibraryUlps ulps.
inline double library_error(double u) { return kLibraryUlps * 2 * u; }

// The bounds are first-order in u; this factor covers the second-order terms (products of two
// errors: below 1e-9 relative for the chains here) and the bound's own float64 evaluation.
inline constexpr double kSecondOrder = 1 + 1e-6;

// The largest |a_i - b_i| / (bound_i * kSecondOrder) over the elements of a and b (CPU
// tensors of one shape); at most 1 when every element is within its bound. NaN in one and
// not the other gives infinity; NaN in both counts as equal.
inline double worst_over_bound(const Tensor& a, const Tensor& b, const std::vector<double>& bound) {
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  if (x.size() != y.size() || x.size() != bound.size()) return std::numeric_limits<double>::infinity();
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] == y[i] || (std::isnan(x[i]) && std::isnan(y[i]))) continue;
    const double diff = std::abs(x[i] - y[i]);
    if (std::isnan(diff)) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, diff / (bound[i] * kSecondOrder));
  }
  return worst;
}

}  // namespace strata::testing
