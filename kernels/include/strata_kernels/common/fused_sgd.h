#pragma once
// Multi-tensor SGD: the per-element update of sgd.h over a chunk table, with an optional
// 16-bit copy of the updated parameter written in the same pass (see fused_adam.h).
#include "strata_kernels/common/fused_adam.h"
#include "strata_kernels/common/sgd.h"

namespace strata_kernels {

template <class T>
struct SgdTensor {
  T* param;
  T* momentum_buffer;  // null: plain SGD (momentum 0)
  const T* grad;
  uint16_t* low_copy;  // bf16/fp16 bits of the updated param, or null
  LowPrecision low_kind;
  SgdScalars<T> scalars;
};

// The three phases of fused_adam.h's FusedAdamOp.
template <class T>
struct FusedSgdOp {
  struct Values {
    T param, momentum_buffer, grad;
  };
  STRATA_HD Values load(const SgdTensor<T>& t, int64_t i) const {
    return {t.param[i], t.momentum_buffer != nullptr ? t.momentum_buffer[i] : T(0), t.grad[i]};
  }
  STRATA_HD void apply(const SgdTensor<T>& t, Values& x) const {
    if (t.momentum_buffer != nullptr) {
      sgd_momentum_update(x.param, x.momentum_buffer, x.grad, t.scalars);
    } else {
      sgd_update(x.param, x.grad, t.scalars);
    }
  }
  STRATA_HD void store(const SgdTensor<T>& t, int64_t i, const Values& x) const {
    t.param[i] = x.param;
    if (t.momentum_buffer != nullptr) t.momentum_buffer[i] = x.momentum_buffer;
    if (t.low_copy != nullptr) t.low_copy[i] = to_low_bits(x.param, t.low_kind);
  }
  STRATA_HD void operator()(const SgdTensor<T>& t, int64_t i) const {
    Values x = load(t, i);
    apply(t, x);
    store(t, i, x);
  }
  STRATA_HD bool vec4_ok(const SgdTensor<T>& t) const {
    return is_vec4_aligned(t.param) && is_vec4_aligned(t.momentum_buffer) && is_vec4_aligned(t.grad) &&
           is_vec4_aligned(t.low_copy);
  }
  STRATA_HD void load4(const SgdTensor<T>& t, int64_t i, Values (&x)[4]) const {
    const Vec4<T> p = load_vec4(t.param, i), g = load_vec4(t.grad, i);
    const Vec4<T> b = t.momentum_buffer != nullptr ? load_vec4(t.momentum_buffer, i) : Vec4<T>{};
    for (int k = 0; k < 4; ++k) x[k] = {p.v[k], b.v[k], g.v[k]};
  }
  STRATA_HD void store4(const SgdTensor<T>& t, int64_t i, const Values (&x)[4]) const {
    Vec4<T> p, b;
    for (int k = 0; k < 4; ++k) {
      p.v[k] = x[k].param;
      b.v[k] = x[k].momentum_buffer;
    }
    store_vec4(t.param, i, p);
    if (t.momentum_buffer != nullptr) store_vec4(t.momentum_buffer, i, b);
    if (t.low_copy != nullptr) {
      Vec4<uint16_t> low;
      for (int k = 0; k < 4; ++k) low.v[k] = to_low_bits(x[k].param, t.low_kind);
      store_vec4(t.low_copy, i, low);
    }
  }
};

}  // namespace strata_kernels
