// attention and causal_attention (kernels in src/backend/cpu/attention; on CUDA cuDNN's fused
// attention of attention_fused.h where switched on, else the composition of
// attention_composite.h).
#include "backend/cpu/attention.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <limits>

#include "backend/dispatch/device_dispatch.h"
#include "backend/gemm_plan.h"
#include "ops/attention_composite.h"
#include "ops/attention_fused.h"
#include "ops/autocast_cast.h"
#include "ops/nn_common.h"
#include "strata/autograd/function.h"
#include "strata/ops/autocast.h"
#include "strata/ops/compare.h"
#include "strata/ops/nn_functional.h"
#include "strata/tensor/factory.h"

namespace strata {
namespace {

// The kernel reads views in place when BLAS can address them (e.g. q/k/v split from one
// [B, T, 3, H, D] projection); anything else is copied once.
Tensor blas_ready(const Tensor& t) {
  Tensor d = t.detach();
  return gemm::row_major_in_place(d) ? d : d.contiguous();
}

// A [B, H, T, D] tensor whose memory is ordered [B, T, H, D] when `time_major`: the layout
// in which heads are merged back (transpose(1, 2) then view) without a copy.
Tensor empty_bhtd(const Shape& s, DType dtype, bool time_major) {
  if (!time_major) return empty(s, {.dtype = dtype});
  return empty({s[0], s[2], s[1], s[3]}, {.dtype = dtype}).transpose(1, 2);
}

// True when t's heads are interleaved within each time step (stride over H below stride
// over T), as for q = x.view({B, T, H, D}).transpose(1, 2).
bool time_major(const Tensor& t) { return t.size(1) > 1 && t.size(2) > 1 && t.stride(1) < t.stride(2); }

// The CPU path: BLAS-ready inputs, the kernel, and a node whose backward reuses the saved
// probabilities (a backend's saved state is its own, so it records its own node).
Tensor cpu_attention(const Tensor& q, const Tensor& k, const Tensor& v, const cpu::AttentionParams& params) {
  const Shape& s = q.shape();
  Tensor qd = blas_ready(q), kd = blas_ready(k), vd = blas_ready(v);
  Tensor out = empty_bhtd(s, q.dtype(), /*time_major=*/true);
  const bool grad = autograd::needs_grad({q, k, v});
  Tensor probs = grad ? empty({s[0], s[1], s[2], k.size(2)}, {.dtype = q.dtype()}) : Tensor();
  cpu::attention_forward(qd, kd, vd, params, out, probs);
  if (grad) {
    std::array<bool, 3> layouts = {time_major(q), time_major(k), time_major(v)};
    cpu::AttentionParams saved{.causal = params.causal, .scale = params.scale, .mask = Tensor()};
    autograd::record("AttentionBackward", {q, k, v}, {out}, {qd, kd, vd, probs},
                     [qd, kd, vd, probs, layouts, saved](autograd::BackwardContext& ctx) {
                       Tensor go = blas_ready(ctx.grad());
                       const Tensor* in[3] = {&qd, &kd, &vd};
                       std::vector<Tensor> grads(3);
                       for (size_t i = 0; i < 3; ++i) {
                         if (ctx.needs(i)) grads[i] = empty_bhtd(in[i]->shape(), qd.dtype(), layouts[i]);
                       }
                       cpu::attention_backward(go, qd, kd, vd, probs, saved, grads[0], grads[1], grads[2]);
                       return grads;
                     });
  }
  return out;
}

void check_qkv(const Tensor& q, const Tensor& k, const Tensor& v, const char* op) {
  const char* names[3] = {"q", "k", "v"};
  const Tensor* inputs[3] = {&q, &k, &v};
  for (int i = 0; i < 3; ++i) {
    // 16-bit inputs are taken too: the fused kernel reads them, or they are widened below.
    if (!detail::is_16bit(inputs[i]->dtype())) detail::check_nn_input(*inputs[i], op, names[i]);
    STRATA_CHECK(inputs[i]->dim() == 4, op, ": ", names[i], " must be [B, heads, T, D], got shape ",
                 inputs[i]->shape());
    STRATA_CHECK(inputs[i]->dtype() == q.dtype(), op, ": ", names[i], " has dtype ", inputs[i]->dtype(), " but q has ",
                 q.dtype());
    const Tensor& t = *inputs[i];
    STRATA_CHECK(t.size(2) < INT_MAX && t.size(3) < INT_MAX && t.stride(2) < INT_MAX, op, ": ", names[i], " of shape ",
                 t.shape(), " and strides ", Shape(t.strides()), " exceeds BLAS's 32-bit sizes");
  }
}

// A mask of q's dtype (additive) or Bool, broadcastable to the scores [B, H, Tq, Tk].
void check_mask(const Tensor& mask, const Shape& scores, DType dtype) {
  STRATA_CHECK(mask.dtype() == dtype || mask.dtype() == DType::Bool, "attention: mask has dtype ", mask.dtype(),
               " (shape ", mask.shape(), ") but q has ", dtype, "; a mask is additive, of q's dtype, or Bool");
  bool fits = mask.dim() <= 4;
  for (int64_t i = 1; fits && i <= mask.dim(); ++i) {
    const int64_t have = mask.size(-i), want = scores[static_cast<size_t>(4 - i)];
    fits = have == want || have == 1;
  }
  STRATA_CHECK(fits, "attention: mask of shape ", mask.shape(), " does not broadcast to the scores' shape ", scores,
               " ([B, H, Tq, Tk])");
  STRATA_CHECK(!autograd::needs_grad({mask}),
               "attention: mask requires grad, but it is a constant here (no gradient reaches it); pass it detached");
}

// The mask as an additive [B, H, Tq, Tk] view (stride 0 along broadcast dimensions). A Bool
// mask becomes 0 (true: the key takes part) or -inf in its own shape first.
Tensor additive_mask(const Tensor& mask, const Shape& scores, DType dtype) {
  Tensor m = mask.detach();
  if (m.dtype() == DType::Bool) {
    m = where(m, zeros({}, {.dtype = dtype}), full({}, -std::numeric_limits<double>::infinity(), {.dtype = dtype}));
  }
  return m.expand(scores);
}

// Under autocast the CPU too runs the composed attention, whose products round as autocast's
// (the fused kernel computes in float32): the same numerics on both devices.
bool under_autocast(const Tensor& q) { return autocast::active() && q.dtype() == DType::Float32; }

// CUDA: cuDNN's fused attention where it is switched on and takes the problem, else the
// composition (which autocast's rounding reaches through its products).
Tensor cuda_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale,
                      const Tensor& mask) {
  if (detail::fused_attention_refusal(q, k, mask, causal).empty()) {
    if (auto out = detail::fused_attention(q, k, v, causal, scale)) return *out;
  }
  return detail::composite_attention(q, k, v, causal, scale, mask);
}

double default_scale(const Tensor& q) { return 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(q.size(3), 1))); }

// bfloat16/float16 q, k, v: cuDNN's fused attention on CUDA where it takes the problem (it
// computes in float32 and rounds the output once), else the float32 attention of the
// widened inputs rounded once to q's dtype, on either device.
Tensor sixteen_bit_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options,
                             const Device& device) {
  const double scale = options.scale.value_or(default_scale(q));
  if (device.is_cuda() && detail::fused_attention_refusal(q, k, options.mask, options.causal).empty()) {
    if (auto out = detail::fused_attention(q, k, v, options.causal, scale)) return *out;
  }
  // Under 16-bit activations the CPU runs the composition on the 16-bit q, k, v (products
  // and softmax each rounding as the GPU's composed path does), not a float32 attention.
  if (!device.is_cuda() && detail::activation_dtype() == q.dtype() && !options.mask.defined())
    return detail::composite_attention(q, k, v, options.causal, scale, Tensor());
  AttentionOptions wide = options;
  wide.scale = scale;
  if (wide.mask.defined() && wide.mask.dtype() != DType::Bool) wide.mask = wide.mask.to(DType::Float32);
  return attention(q.to(DType::Float32), k.to(DType::Float32), v.to(DType::Float32), wide).to(q.dtype());
}

}  // namespace

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options) {
  check_qkv(q, k, v, "attention");
  STRATA_CHECK(v.shape() == k.shape(), "attention: v has shape ", v.shape(), " but k has shape ", k.shape(),
               " (both must be [B, Hkv, Tk, D])");
  const int64_t batch = q.size(0), heads = q.size(1), kv_heads = k.size(1), tq = q.size(2), tk = k.size(2);
  STRATA_CHECK(k.size(0) == batch && k.size(3) == q.size(3), "attention: k has shape ", k.shape(), " but q has shape ",
               q.shape(), " (q [B, H, Tq, D] needs k and v [B, Hkv, Tk, D] with the same B and D)");
  STRATA_CHECK(kv_heads > 0 ? heads % kv_heads == 0 : heads == 0, "attention: q has ", heads,
               " heads, not a multiple of k and v's ", kv_heads, " (q ", q.shape(), ", k ", k.shape(), ")");
  STRATA_CHECK(!options.causal || tq <= tk, "attention: causal with more queries (", tq, ") than keys (", tk,
               "): the queries are the last Tq of the Tk positions (q ", q.shape(), ", k ", k.shape(), ")");
  STRATA_CHECK(tk > 0 || tq == 0, "attention: no keys (k of shape ", k.shape(), ") for ", tq, " queries");
  const double scale = options.scale.value_or(default_scale(q));
  STRATA_CHECK(std::isfinite(scale), "attention: scale must be finite, got ", scale);
  const Shape scores{batch, heads, tq, tk};
  if (options.mask.defined()) check_mask(options.mask, scores, q.dtype());
  const Device device = detail::common_device("attention", {{"q", q}, {"k", k}, {"v", v}, {"mask", options.mask}});
  if (detail::is_16bit(q.dtype())) return sixteen_bit_attention(q, k, v, options, device);
  Tensor mask = options.mask.defined() ? additive_mask(options.mask, scores, q.dtype()) : Tensor();
  if (under_autocast(q) && !device.is_cuda()) return detail::composite_attention(q, k, v, options.causal, scale, mask);
  return detail::on_device(
      "attention", device,
      [&] { return cpu_attention(q, k, v, {.causal = options.causal, .scale = scale, .mask = mask}); },
      [&] { return cuda_attention(q, k, v, options.causal, scale, mask); });
}

Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v) {
  check_qkv(q, k, v, "causal_attention");
  for (const auto& [t, name] : {std::pair{k, "k"}, std::pair{v, "v"}}) {
    STRATA_CHECK(t.shape() == q.shape(), "causal_attention: ", name, " has shape ", t.shape(), " but q has shape ",
                 q.shape(), " (all three must be [B, H, T, D])");
  }
  const Device device = detail::common_device("causal_attention", {{"q", q}, {"k", k}, {"v", v}});
  if (detail::is_16bit(q.dtype())) return sixteen_bit_attention(q, k, v, {.causal = true}, device);
  if (under_autocast(q) && !device.is_cuda())
    return detail::composite_attention(q, k, v, true, default_scale(q), Tensor());
  return detail::on_device(
      "causal_attention", device,
      [&] { return cpu_attention(q, k, v, {.causal = true, .scale = default_scale(q), .mask = Tensor()}); },
      [&] { return cuda_attention(q, k, v, true, default_scale(q), Tensor()); });
}

}  // namespace strata
