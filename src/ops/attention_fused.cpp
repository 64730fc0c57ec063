#include "ops/attention_fused.h"

#include "backend/cuda/cuda_ops.h"
#include "strata/autograd/function.h"
#include "strata/ops/autocast.h"
#include "strata/tensor/cuda.h"

namespace strata::detail {
namespace {

// The dtype the fused kernels run in for q: q's own when 16-bit, the autocast scope's for
// float32 under a 16-bit scope; nullopt otherwise.
std::optional<DType> fused_dtype(const Tensor& q) {
  if (q.dtype() == DType::BFloat16 || q.dtype() == DType::Float16) return q.dtype();
  if (q.dtype() == DType::Float32) return autocast::active();
  return std::nullopt;
}

// cuDNN reads strided operands whose last dimension is contiguous and whose rows start on
// 16-byte boundaries; anything else is copied once.
Tensor fused_ready(const Tensor& t) {
  const int64_t esize = static_cast<int64_t>(dtype_size(t.dtype()));
  bool ok = t.stride(3) == 1 && reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
  for (int i = 0; i < 3 && ok; ++i) ok = t.size(i) == 1 || (t.stride(i) * esize) % 16 == 0;
  return ok ? t : t.contiguous();
}

}  // namespace

std::string fused_attention_refusal(const Tensor& q, const Tensor& k, const Tensor& mask, bool causal) {
  if (!cuda::fused_attention()) return "cuda::fused_attention() is off";
  if (!fused_dtype(q)) return "dtype is not bfloat16/float16 (nor float32 under a 16-bit autocast scope)";
  if (mask.defined()) return "a mask is given";
  if (k.size(1) != q.size(1)) return "fewer kv heads than query heads";
  if (causal && q.size(2) != k.size(2)) return "causal with Tq != Tk";
  if (q.size(3) % 8 != 0 || q.size(3) > 128) return "head dimension not a multiple of 8 up to 128";
  if (q.numel() == 0 || k.numel() == 0) return "empty";
  if (!q.device().is_cuda()) return "not on CUDA";
  return "";
}

std::optional<Tensor> fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale) {
  const DType dtype = *fused_dtype(q);
  // Under autocast the casts are ordinary differentiable ops around the fused one.
  const Tensor q16 = fused_ready(q.to(dtype)), k16 = fused_ready(k.to(dtype)), v16 = fused_ready(v.to(dtype));
  const bool grad = autograd::needs_grad({q16, k16, v16});
  auto r = cuda_ops::fused_attention_forward(q16.detach(), k16.detach(), v16.detach(), scale, causal, grad);
  if (!r) return std::nullopt;
  if (grad) {
    const Tensor qs = q16.detach(), ks = k16.detach(), vs = v16.detach(), outs = r->out.detach();
    autograd::record(
        "FusedAttentionBackward", {q16, k16, v16}, {r->out}, {qs, ks, vs, outs, r->stats},
        [q = qs, k = ks, v = vs, out = outs, stats = r->stats, scale, causal](autograd::BackwardContext& ctx) {
          const Tensor g = ctx.grad().to(q.dtype()).contiguous();
          auto d = cuda_ops::fused_attention_backward(q, k, v, out, stats, g, scale, causal);
          return std::vector<Tensor>{d.dq, d.dk, d.dv};
        });
  }
  return r->out.to(q.dtype());
}

}  // namespace strata::detail
