#pragma once
// Multi-tensor Adam/AdamW: the per-element update of adam.h over a chunk table, writing an
// optional 16-bit copy of the updated parameter (bf16 or fp16 model weights beside fp32
// master weights) in the same pass. One functor for the CPU executor and the CUDA kernel.
#include "strata_kernels/common/adam.h"
#include "strata_kernels/common/half.h"
#include "strata_kernels/common/macros.h"
#include "strata_kernels/common/multi_tensor.h"

namespace strata_kernels {

enum class LowPrecision : int32_t { None = 0, BFloat16 = 1, Float16 = 2 };

// One tensor of the launch: its parameter, gradient and moments (all of type T, contiguous,
// numel elements) and the step constants of its own step count and group.
template <class T>
struct AdamTensor {
  T* param;
  T* exp_avg;
  T* exp_avg_sq;
  const T* grad;
  uint16_t* low_copy;  // bf16/fp16 bits of the updated param, or null
  LowPrecision low_kind;
  AdamScalars<T> scalars;
};

template <class T>
STRATA_HD uint16_t to_low_bits(T x, LowPrecision kind) {
  const float f = static_cast<float>(x);
  return kind == LowPrecision::BFloat16 ? float_to_bf16_bits(f) : float_to_half_bits(f);
}

// Element i of one tensor, in three phases so that the CUDA executor can issue the loads
// of several elements before their math (memory-level parallelism): load, apply (the
// math, adam.h), store. operator() runs the three in a row (the CPU executor).
template <class T>
struct FusedAdamOp {
  struct Values {
    T param, exp_avg, exp_avg_sq, grad;
  };
  STRATA_HD Values load(const AdamTensor<T>& t, int64_t i) const {
    return {t.param[i], t.exp_avg[i], t.exp_avg_sq[i], t.grad[i]};
  }
  STRATA_HD void apply(const AdamTensor<T>& t, Values& x) const {
    adam_update(x.param, x.exp_avg, x.exp_avg_sq, x.grad, t.scalars);
  }
  STRATA_HD void store(const AdamTensor<T>& t, int64_t i, const Values& x) const {
    t.param[i] = x.param;
    t.exp_avg[i] = x.exp_avg;
    t.exp_avg_sq[i] = x.exp_avg_sq;
    if (t.low_copy != nullptr) t.low_copy[i] = to_low_bits(x.param, t.low_kind);
  }
  STRATA_HD void operator()(const AdamTensor<T>& t, int64_t i) const {
    Values x = load(t, i);
    apply(t, x);
    store(t, i, x);
  }
  // Four elements at once through aligned 128-bit accesses (the CUDA executor's fast path,
  // taken where vec4_ok holds); each element's math is apply's.
  STRATA_HD bool vec4_ok(const AdamTensor<T>& t) const {
    return is_vec4_aligned(t.param) && is_vec4_aligned(t.exp_avg) && is_vec4_aligned(t.exp_avg_sq) &&
           is_vec4_aligned(t.grad) && is_vec4_aligned(t.low_copy);
  }
  STRATA_HD void load4(const AdamTensor<T>& t, int64_t i, Values (&x)[4]) const {
    const Vec4<T> p = load_vec4(t.param, i), m = load_vec4(t.exp_avg, i), v = load_vec4(t.exp_avg_sq, i),
                  g = load_vec4(t.grad, i);
    for (int k = 0; k < 4; ++k) x[k] = {p.v[k], m.v[k], v.v[k], g.v[k]};
  }
  STRATA_HD void store4(const AdamTensor<T>& t, int64_t i, const Values (&x)[4]) const {
    Vec4<T> p, m, v;
    for (int k = 0; k < 4; ++k) {
      p.v[k] = x[k].param;
      m.v[k] = x[k].exp_avg;
      v.v[k] = x[k].exp_avg_sq;
    }
    store_vec4(t.param, i, p);
    store_vec4(t.exp_avg, i, m);
    store_vec4(t.exp_avg_sq, i, v);
    if (t.low_copy != nullptr) {
      Vec4<uint16_t> low;
      for (int k = 0; k < 4; ++k) low.v[k] = to_low_bits(x[k].param, t.low_kind);
      store_vec4(t.low_copy, i, low);
    }
  }
};

}  // namespace strata_kernels
