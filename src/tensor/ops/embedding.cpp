// embedding lookup (kernels in src/tensor/cpu/embedding).
#include "../cpu/embedding.h"

#include "nn_common.h"
#include "strata/autograd/function.h"
#include "strata/tensor/ops/nn_functional.h"

namespace strata {

Tensor embedding(const Tensor& indices, const Tensor& weight) {
  detail::check_nn_input(weight, "embedding", "weight");
  STRATA_CHECK(weight.dim() == 2, "embedding: weight must be [vocab, dim], got shape ", weight.shape());
  STRATA_CHECK(indices.defined(), "embedding: indices are undefined");
  STRATA_CHECK(indices.dtype() == DType::Int32 || indices.dtype() == DType::Int64, "embedding: indices have dtype ",
               indices.dtype(), " (shape ", indices.shape(), "); int32 or int64 expected");
  STRATA_CHECK(indices.device().is_cpu(), "embedding: indices are on ", indices.device(),
               "; only CPU tensors are supported so far");
  Tensor idx = indices.contiguous();
  Tensor out = cpu::embedding_forward(idx, detail::contiguous_data(weight));
  if (autograd::needs_grad({weight})) {
    autograd::record("EmbeddingBackward", {weight}, {out}, [idx, vocab = weight.size(0)](autograd::BackwardContext& ctx) {
      return std::vector<Tensor>{cpu::embedding_backward(detail::contiguous_data(ctx.grad()), idx, vocab)};
    });
  }
  return out;
}

}  // namespace strata
