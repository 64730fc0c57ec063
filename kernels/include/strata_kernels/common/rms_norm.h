#pragma once
// RMS normalisation math shared by the CPU loops and the CUDA kernels. Per row of D values:
//   rstd = 1 / sqrt(sum(x^2) / D + eps),   y = x * rstd * w
// and, for g = dL/dy,
//   dx = rstd * g * w - x * c,   c = rstd^3 * sum(g * w * x) / D,   dw += g * x * rstd.
// A row's sums are reduced by the caller (a CPU row loop, a CUDA block): these functions
// finish them, so both backends share the formulas and their accumulation in double.
#include <math.h>
#include <stdint.h>

#include "strata_kernels/common/macros.h"

namespace strata_kernels {

// rstd of a row whose squares sum to sum_sq.
STRATA_HD double rms_norm_rstd(double sum_sq, int64_t d, double eps) {
  return 1.0 / sqrt(sum_sq / static_cast<double>(d) + eps);
}

template <class T>
STRATA_HD T rms_norm_out(T x, T rstd, T w) {
  return x * rstd * w;
}

// The row coefficient c of dx, from dot = sum(g * w * x) over the row.
STRATA_HD double rms_norm_grad_coeff(double dot, double rstd, int64_t d) {
  return rstd * rstd * rstd * dot / static_cast<double>(d);
}

template <class T>
STRATA_HD T rms_norm_grad_x(T g, T w, T x, T rstd, T coeff) {
  return rstd * g * w - x * coeff;
}

}  // namespace strata_kernels
