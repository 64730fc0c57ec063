#pragma once
// Multi-tensor Lion: the per-element update of lion.h over a chunk table, with an optional
// 16-bit copy of the updated parameter written in the same pass (see fused_adam.h).
#include "strata_kernels/common/fused_adam.h"
#include "strata_kernels/common/lion.h"

namespace strata_kernels {

template <class T>
struct LionTensor {
  T* param;
  T* exp_avg;
  const T* grad;
  uint16_t* low_copy;  // bf16/fp16 bits of the updated param, or null
  LowPrecision low_kind;
  LionScalars<T> scalars;
};

// The three phases of fused_adam.h's FusedAdamOp.
template <class T>
struct FusedLionOp {
  struct Values {
    T param, exp_avg, grad;
  };
  STRATA_HD Values load(const LionTensor<T>& t, int64_t i) const { return {t.param[i], t.exp_avg[i], t.grad[i]}; }
  STRATA_HD void apply(const LionTensor<T>& t, Values& x) const { lion_update(x.param, x.exp_avg, x.grad, t.scalars); }
  STRATA_HD void store(const LionTensor<T>& t, int64_t i, const Values& x) const {
    t.param[i] = x.param;
    t.exp_avg[i] = x.exp_avg;
    if (t.low_copy != nullptr) t.low_copy[i] = to_low_bits(x.param, t.low_kind);
  }
  STRATA_HD void operator()(const LionTensor<T>& t, int64_t i) const {
    Values x = load(t, i);
    apply(t, x);
    store(t, i, x);
  }
  STRATA_HD bool vec4_ok(const LionTensor<T>& t) const {
    return is_vec4_aligned(t.param) && is_vec4_aligned(t.exp_avg) && is_vec4_aligned(t.grad) &&
           is_vec4_aligned(t.low_copy);
  }
  STRATA_HD void load4(const LionTensor<T>& t, int64_t i, Values (&x)[4]) const {
    const Vec4<T> p = load_vec4(t.param, i), m = load_vec4(t.exp_avg, i), g = load_vec4(t.grad, i);
    for (int k = 0; k < 4; ++k) x[k] = {p.v[k], m.v[k], g.v[k]};
  }
  STRATA_HD void store4(const LionTensor<T>& t, int64_t i, const Values (&x)[4]) const {
    Vec4<T> p, m;
    for (int k = 0; k < 4; ++k) {
      p.v[k] = x[k].param;
      m.v[k] = x[k].exp_avg;
    }
    store_vec4(t.param, i, p);
    store_vec4(t.exp_avg, i, m);
    if (t.low_copy != nullptr) {
      Vec4<uint16_t> low;
      for (int k = 0; k < 4; ++k) low.v[k] = to_low_bits(x[k].param, t.low_kind);
      store_vec4(t.low_copy, i, low);
    }
  }
};

}  // namespace strata_kernels
