#pragma once
// Bounds for comparing two float32 computations of the same exact value that take different
// paths: other kernels (which GEMM kernel OpenBLAS or oneDNN picks depends on the CPU), other
// orders of the additions, reductions split over ranks. docs/testing.md "Bounds".
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace strata::test {

// float32's unit roundoff: one correctly rounded operation errs by at most this, relatively.
inline constexpr double kUnitRoundoff32 = 0x1p-24;  // 5.96e-8

// Worst-case relative error of a float32 sum or dot product of n terms in any order
// (Higham's gamma_n), relative to the sum of the terms' magnitudes.
inline constexpr double gamma32(double n) { return n * kUnitRoundoff32 / (1 - n * kUnitRoundoff32); }

// Path a (under test) and path b (the reference) compute the same exact x in float32:
//   |a - b| <= |a - x| + |b - x|.
// |b - x| is measured: b's own float64 run stands in for x (its error is 2^-29 of b's), in the
// comparison's own metric, on this CPU with the kernels it picked. a runs the same operations
// on the same data with its reductions cut elsewhere (shorter pieces plus a reduction over
// ranks), so its rounding errors have the same size; but the worst entry after AdamW steps
// is heavy-tailed (AdamW divides by sqrt(v), so an entry's error grows as 1/|g|, and which
// path's rounding lands hardest on the smallest kept gradients is chance): |a - b| was
// measured up to 5.4x |b - x| over the distributed tests under five kernel selections
// (docs/testing.md "Bounds"). kPathFactor = 1 (b) + 15 (a: about 3x the worst seen).
// kRoundingFloor: the two results' own last roundings (an ulp is at most 2u relative), for a
// reference error that is by chance about zero.
inline constexpr double kPathFactor = 16;
inline constexpr double kRoundingFloor = 4 * kUnitRoundoff32;
inline double float32_bound(double reference_error) { return kPathFactor * reference_error + kRoundingFloor; }

// EXPECT-style check of a float32 difference against float32_bound(reference_error). Prints
// the ratio difference / reference_error on rank-0-like callers (`print`), which is what
// kPathFactor must cover (grep "float32 bound" in the test logs).
inline ::testing::AssertionResult within_float32_bound(double difference, double reference_error,
                                                       const std::string& what, bool print = true) {
  const double bound = float32_bound(reference_error);
  if (print)
    std::printf("float32 bound: %s: difference %.3g, reference error %.3g, ratio %.2f, bound %.3g\n", what.c_str(),
                difference, reference_error, reference_error > 0 ? difference / reference_error : 0.0, bound);
  if (difference <= bound) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": float32 difference " << difference << " exceeds " << kPathFactor
                                       << " x the reference path's own float32 error " << reference_error << " + "
                                       << kRoundingFloor << " = " << bound;
}

}  // namespace strata::test
