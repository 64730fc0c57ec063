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

// nn::MoE in float64 on a GPU against the CPU (test_indexing_gpu.cpp, test_expert_parallel_gpu.cpp):
// the bound on a tensor's largest difference relative to its largest CPU entry (max_relative),
// for configs with C, I <= 8, E <= 8, k = 2 and at most 16 tokens. With the routing equal
// (integers, checked first), both devices evaluate one expression graph and differ only in
// rounding: the GEMMs' summation order (cuBLAS against OpenBLAS: a dot product of length K
// within gamma_K of exact), exp and log (library_error each), reductions' order, and (expert
// parallel) the order of a two-rank gradient sum. Each value is then within gamma_L * G of
// exact relative to its tensor's scale, L bounding the roundings on one dependency chain and
// G the growth of relative error through cancellation. L: gate GEMM (K = C <= 8), softmax
// (subtract, exp, E-term sum, divide: <= 11), gate normalisation (k-term sum, divide: 3),
// w1 / w3 GEMMs (8), silu (negate, exp, add, divide, multiply: 5), the SwiGLU product (1),
// w2 GEMM (K = I <= 8), the gate product (1), the combine's index_add (k = 2): <= 47; the
// auxiliary losses (means over <= 16 tokens, E-term sums, logsumexp, squares, coefficients)
// are no longer. Backward retraces one chain (the same counts) and adds a weight-gradient
// reduction over <= 16 tokens and a two-term rank sum: L <= 2 * 47 + 18 < 128. G = 1e3 is the
// stated growth factor: parameters of order one (N(0, 0.5^2), a router bias of 3) and widths
// under 17 leave sums of mixed signs no more cancellation than that at a tensor's largest entry. Two independent
// computations: 2 * gamma_128 * G (about 2.8e-11).
inline double moe_float64_bound() { return 2 * gamma_k(128, unit_roundoff(DType::Float64)) * 1e3; }

// max_i |a_i - b_i| / max_i |b_i| (a, b CPU tensors of one shape; NaN: infinity).
inline double max_relative(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  if (x.size() != y.size()) return std::numeric_limits<double>::infinity();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double d = std::abs(x[i] - y[i]);
    if (std::isnan(d)) return std::numeric_limits<double>::infinity();
    diff = std::max(diff, d);
    scale = std::max(scale, std::abs(y[i]));
  }
  return diff / std::max(scale, std::numeric_limits<double>::min());
}

}  // namespace strata::testing
