// embedding lookup (kernels in src/backend/cpu/embedding, src/backend/cuda/embedding).
#include "backend/cpu/embedding.h"

#include "backend/cuda/cuda_ops.h"
#include "backend/dispatch/device_dispatch.h"
#include "ops/nn_common.h"
#include "strata/autograd/function.h"
#include "strata/ops/nn_functional.h"

namespace strata {

Tensor embedding(const Tensor& indices, const Tensor& weight, std::optional<int64_t> padding_idx) {
  if (weight.defined() && detail::is_16bit(weight.dtype())) {
    detail::check_param(weight, DType::Float32, "embedding", "weight");  // computes in float32
  } else {
    detail::check_nn_input(weight, "embedding", "weight");
  }
  STRATA_CHECK(weight.dim() == 2, "embedding: weight must be [vocab, dim], got shape ", weight.shape());
  STRATA_CHECK(indices.defined(), "embedding: indices are undefined");
  STRATA_CHECK(indices.dtype() == DType::Int32 || indices.dtype() == DType::Int64, "embedding: indices have dtype ",
               indices.dtype(), " (shape ", indices.shape(), "); int32 or int64 expected");
  // torch's convention: a negative padding_idx counts from the end of the table.
  const int64_t vocab = weight.size(0);
  STRATA_CHECK(!padding_idx || (*padding_idx >= -vocab && *padding_idx < vocab), "embedding: padding_idx ",
               padding_idx.value_or(0), " is outside [-", vocab, ", ", vocab, ") for weight of shape ", weight.shape());
  const int64_t pad = padding_idx ? (*padding_idx + vocab) % vocab : -1;
  const Device device = detail::common_device("embedding", {{"indices", indices}, {"weight", weight}});
  Tensor idx = indices.contiguous();
  // A 16-bit weight's float32 copy lives only for this lookup (backward does not read it).
  Tensor out = detail::on_device(
      "embedding", device, [&] { return cpu::embedding_forward(idx, detail::param_data(weight)); },
      [&] { return cuda_ops::embedding_forward(idx, detail::param_data(weight)); });
  if (autograd::needs_grad({weight})) {
    autograd::record("EmbeddingBackward", {weight}, {out}, {idx},
                     [idx, vocab, pad, wdt = weight.dtype()](autograd::BackwardContext& ctx) {
                       Tensor go = detail::contiguous_data(ctx.grad());
                       Tensor g = detail::on_device(
                           "embedding backward", idx.device(), [&] { return cpu::embedding_backward(go, idx, vocab); },
                           [&] { return cuda_ops::embedding_backward(go, idx, vocab); });
                       if (pad >= 0) g.select(0, pad).zero_();  // the padding row learns nothing
                       return std::vector<Tensor>{detail::param_grad(g, wdt)};
                     });
  }
  return out;
}

}  // namespace strata
