// causal_attention (kernels in src/tensor/cpu/attention).
#include "../cpu/attention.h"

#include <array>
#include <climits>

#include "../device_dispatch.h"
#include "../gemm_plan.h"
#include "nn_common.h"
#include "strata/autograd/function.h"
#include "strata/tensor/factory.h"
#include "strata/tensor/ops/nn_functional.h"

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
Tensor cpu_attention(const Tensor& q, const Tensor& k, const Tensor& v) {
  const Shape& s = q.shape();
  Tensor qd = blas_ready(q), kd = blas_ready(k), vd = blas_ready(v);
  Tensor out = empty_bhtd(s, q.dtype(), /*time_major=*/true);
  const bool grad = autograd::needs_grad({q, k, v});
  Tensor probs = grad ? empty({s[0], s[1], s[2], s[2]}, {.dtype = q.dtype()}) : Tensor();
  cpu::attention_forward(qd, kd, vd, out, probs);
  if (grad) {
    std::array<bool, 3> layouts = {time_major(q), time_major(k), time_major(v)};
    autograd::record("CausalAttentionBackward", {q, k, v}, {out},
                     [qd, kd, vd, probs, layouts](autograd::BackwardContext& ctx) {
                       Tensor go = blas_ready(ctx.grad());
                       std::vector<Tensor> grads(3);
                       for (size_t i = 0; i < 3; ++i) {
                         if (ctx.needs(i)) grads[i] = empty_bhtd(qd.shape(), qd.dtype(), layouts[i]);
                       }
                       cpu::attention_backward(go, qd, kd, vd, probs, grads[0], grads[1], grads[2]);
                       return grads;
                     });
  }
  return out;
}

}  // namespace

Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v) {
  const char* names[3] = {"q", "k", "v"};
  const Tensor* inputs[3] = {&q, &k, &v};
  for (int i = 0; i < 3; ++i) detail::check_nn_input(*inputs[i], "causal_attention", names[i]);
  STRATA_CHECK(q.dim() == 4, "causal_attention: q must be [B, H, T, D], got shape ", q.shape());
  for (int i = 1; i < 3; ++i) {
    STRATA_CHECK(inputs[i]->shape() == q.shape(), "causal_attention: ", names[i], " has shape ", inputs[i]->shape(),
                 " but q has shape ", q.shape(), " (all three must be [B, H, T, D])");
    STRATA_CHECK(inputs[i]->dtype() == q.dtype(), "causal_attention: ", names[i], " has dtype ", inputs[i]->dtype(),
                 " but q has ", q.dtype());
  }
  const Shape& s = q.shape();
  for (int i = 0; i < 3; ++i) {
    STRATA_CHECK(s[2] < INT_MAX && s[3] < INT_MAX && inputs[i]->stride(2) < INT_MAX, "causal_attention: ", names[i],
                 " of shape ", s, " and strides ", Shape(inputs[i]->strides()), " exceeds BLAS's 32-bit sizes");
  }
  const Device device = detail::common_device("causal_attention", {{"q", q}, {"k", k}, {"v", v}});
  return detail::on_device("causal_attention", device, [&] { return cpu_attention(q, k, v); });
}

}  // namespace strata
