#pragma once
// The per-element update of torch.optim.SGD (coupled L2 weight decay, momentum with
// dampening, Nesterov), shared by the CPU loop and the CUDA kernels. Flags are read with
// ?: rather than if, so that a loop over elements stays branch-free and vectorises.
#include "strata_kernels/common/macros.h"

namespace strata_kernels {

// Per-step constants, computed once in double on the host and cast to the parameter's type
// (as PyTorch casts its Python-float hyper-parameters to the tensor's scalar type).
template <class T>
struct SgdScalars {
  T neg_lr;        // -lr
  T weight_decay;  // coupled: d = g + weight_decay * p (skipped when 0, as torch)
  T momentum;      // buf = momentum * buf + (1 - dampening) * d
  T one_minus_dampening;
  bool nesterov;     // d = d + momentum * buf instead of d = buf
  bool init_buffer;  // first step with a gradient: buf = d (torch: no dampening then)
};

// Plain SGD (momentum 0): p -= lr * (g + wd * p).
template <class T>
STRATA_HD void sgd_update(T& p, T g, const SgdScalars<T>& s) {
  const T d = s.weight_decay != T(0) ? g + s.weight_decay * p : g;
  p = p + s.neg_lr * d;
}

// SGD with momentum buffer element `buf` (must hold a finite value, e.g. 0, even when
// init_buffer is set: it is read and then discarded).
template <class T>
STRATA_HD void sgd_momentum_update(T& p, T& buf, T g, const SgdScalars<T>& s) {
  T d = s.weight_decay != T(0) ? g + s.weight_decay * p : g;
  const T b = s.init_buffer ? d : buf * s.momentum + s.one_minus_dampening * d;
  buf = b;
  d = s.nesterov ? d + s.momentum * b : b;
  p = p + s.neg_lr * d;
}

}  // namespace strata_kernels
