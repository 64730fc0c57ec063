#pragma once
// The per-element update of torch.optim.Adam (L2 decay added to the gradient) and
// torch.optim.AdamW (decoupled decay), shared by the CPU loop and the CUDA kernels.
#include <math.h>

#include "strata_kernels/common/macros.h"

namespace strata_kernels {

// Per-step constants, computed once in double on the host (adam_scalars) and cast to the
// parameter's type, as PyTorch casts its Python-float hyper-parameters.
template <class T>
struct AdamScalars {
  T beta1, beta2;
  T one_minus_beta1, one_minus_beta2;
  T neg_step_size;          // -lr / (1 - beta1^step)
  T bias_correction2_sqrt;  // sqrt(1 - beta2^step)
  T eps;
  T l2_weight_decay;  // Adam: g += wd * p (0 for AdamW; skipped when 0, as torch)
  T decay_factor;     // AdamW: p *= 1 - lr * wd (1 for Adam: exact no-op)
};

template <class T>
inline AdamScalars<T> adam_scalars(double lr, double beta1, double beta2, double eps, double weight_decay,
                                   bool decoupled, long long step) {
  const double bias_correction1 = 1.0 - pow(beta1, static_cast<double>(step));
  const double bias_correction2 = 1.0 - pow(beta2, static_cast<double>(step));
  AdamScalars<T> s;
  s.beta1 = static_cast<T>(beta1);
  s.beta2 = static_cast<T>(beta2);
  s.one_minus_beta1 = static_cast<T>(1.0 - beta1);
  s.one_minus_beta2 = static_cast<T>(1.0 - beta2);
  s.neg_step_size = static_cast<T>(-(lr / bias_correction1));
  s.bias_correction2_sqrt = static_cast<T>(sqrt(bias_correction2));
  s.eps = static_cast<T>(eps);
  s.l2_weight_decay = static_cast<T>(decoupled ? 0.0 : weight_decay);
  s.decay_factor = static_cast<T>(decoupled ? 1.0 - lr * weight_decay : 1.0);
  return s;
}

// Updates one parameter element `p` with gradient `g` and its moments `m`, `v`, in the
// order of torch's single-tensor loop, so float64 results agree to rounding (torch's
// vectorised CPU kernels may fuse some multiply-adds). Branch-free, so loops vectorise.
template <class T>
STRATA_HD void adam_update(T& p, T& m, T& v, T g, const AdamScalars<T>& s) {
  p = p * s.decay_factor;
  g = s.l2_weight_decay != T(0) ? g + s.l2_weight_decay * p : g;
  m = m * s.beta1 + s.one_minus_beta1 * g;
  v = v * s.beta2 + s.one_minus_beta2 * g * g;
  const T denom = sqrt(v) / s.bias_correction2_sqrt + s.eps;
  p = p + s.neg_step_size * (m / denom);
}

}  // namespace strata_kernels
