#pragma once
// exp for float that the compiler can vectorise (glibc's expf is a scalar
// calls unless built with -ffast-math). Softmax, cross-entropy, attention and GELU spend
// most of their non-GEMM time here. The GPU runs the same code (not its own expf), so
// sigmoid, SiLU and GELU give the same bits on both.
//
// fast_exp(float): Cody-Waite range reduction x = n ln2 + r, |r| <= ln2/2, then the
// degree-7 Taylor polynomial of e^r (truncation error < 1e-8 relative) and 2^n built in
// the exponent bits. Relative error within about 2 ulp of expf down to -87.3; below about
// -87.7 it returns 0 (true results there are denormal, < 1.2e-38); above 88.3 it
// saturates at e^88.3 (about 2.1e38) instead of inf. NaN propagates. Branch-free: without
// SSE4.1 GCC refuses to if-convert a general select (the comparison may trap), but the
// two clamps become min/max, and n = -127 gives a zero exponent field, i.e. 2^n = 0.
// The double overload calls the platform's exp (glibc, or CUDA's device math: they may
// differ by an ulp or two).
#include <math.h>
#include <stdint.h>

#include "strata_kernels/common/half.h"
#include "strata_kernels/common/macros.h"

namespace strata_kernels {

STRATA_HD float fast_exp(float x) {
  const float kLog2e = 1.44269504088896341f;
  // ln2 split so that n * kLn2Hi is exact for |n| < 2^9 (kLn2Hi has 16 significant bits).
  const float kLn2Hi = 0.693145751953125f;
  const float kLn2Lo = 1.42860682030941723212e-6f;
  // Adding 1.5 * 2^23 rounds to an integer held in the low mantissa bits.
  const float kShifter = 12582912.0f;
  float xc = x > 88.3f ? 88.3f : x;
  xc = xc < -88.0f ? -88.0f : xc;
  const float t = xc * kLog2e + kShifter;
  const float n = t - kShifter;
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;
  // e^r = sum r^k / k!, k <= 7, in Horner form.
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^n: the integer n sits in the low bits of t; move it into the exponent field.
  const int32_t ni = static_cast<int32_t>(float_bits(t) - float_bits(kShifter));
  const float scale = bits_float(static_cast<uint32_t>(ni + 127) << 23);
  return p * scale;
}

STRATA_HD double fast_exp(double x) { return exp(x); }

}  // namespace strata_kernels
