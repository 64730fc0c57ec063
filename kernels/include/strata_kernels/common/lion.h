#pragma once
// The per-element update of Lion (Chen et al. 2023, "Symbolic Discovery of Optimization
// Algorithms"), shared by the CPU loop and the CUDA kernels:
//   p *= 1 - lr * wd;  c = beta1 * m + (1 - beta1) * g;  p -= lr * sign(c);
//   m = beta2 * m + (1 - beta2) * g.
#include "strata_kernels/common/macros.h"

namespace strata_kernels {

// Per-step constants, computed once in double on the host and cast to the parameter's type.
template <class T>
struct LionScalars {
  T neg_lr;  // -lr
  T beta1, one_minus_beta1;
  T beta2, one_minus_beta2;
  T decay_factor;  // 1 - lr * wd (1 without decay: an exact no-op)
};

template <class T>
inline LionScalars<T> lion_scalars(double lr, double beta1, double beta2, double weight_decay) {
  return {.neg_lr = static_cast<T>(-lr),
          .beta1 = static_cast<T>(beta1),
          .one_minus_beta1 = static_cast<T>(1.0 - beta1),
          .beta2 = static_cast<T>(beta2),
          .one_minus_beta2 = static_cast<T>(1.0 - beta2),
          .decay_factor = static_cast<T>(1.0 - lr * weight_decay)};
}

// sign(x) as torch.sign: -1, 0 or 1, and NaN for NaN (a NaN gradient must show in the
// parameter, not turn into a silent zero step).
template <class T>
STRATA_HD T sign_of(T x) {
  return x > T(0) ? T(1) : (x < T(0) ? T(-1) : x);
}

template <class T>
STRATA_HD void lion_update(T& p, T& m, T g, const LionScalars<T>& s) {
  p = p * s.decay_factor;
  const T c = m * s.beta1 + s.one_minus_beta1 * g;
  p = p + s.neg_lr * sign_of(c);
  m = m * s.beta2 + s.one_minus_beta2 * g;
}

}  // namespace strata_kernels
