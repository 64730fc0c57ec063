#include "strata/nn/causal_lm.h"

#include "strata/tensor/ops.h"

namespace strata::nn {

Tensor CausalLM::loss(const Tensor& tokens, const Tensor& targets) {
  STRATA_CHECK(targets.shape() == tokens.shape(), "loss: targets shape ", targets.shape(),
               " differs from tokens shape ", tokens.shape());
  Tensor logits = forward(tokens, nullptr);
  const int64_t N = tokens.numel();
  return cross_entropy(logits.view({N, vocab_size()}), targets.reshape({N}));
}

int64_t CausalLM::check_tokens(const char* model, const Tensor& tokens, const KVCache* cache) const {
  STRATA_CHECK(tokens.dim() == 2, model, ": tokens must be [batch, time], got shape ", tokens.shape());
  STRATA_CHECK(tokens.dtype() == DType::Int64, model, ": tokens must be int64, got ", tokens.dtype());
  const int64_t offset = cache != nullptr ? cache->length() : 0;
  const int64_t T = tokens.size(1);
  STRATA_CHECK(T > 0, model, ": tokens of shape ", tokens.shape(), " hold no positions");
  STRATA_CHECK(offset + T <= context_length(), model, ": sequence length ", offset + T,
               cache != nullptr ? " (cached + new)" : "", " exceeds the context of ", context_length());
  STRATA_CHECK(cache == nullptr || cache->num_layers() == num_layers(), model, ": the cache has ",
               cache == nullptr ? 0 : cache->num_layers(), " layers, the model ", num_layers());
  return offset;
}

}  // namespace strata::nn
