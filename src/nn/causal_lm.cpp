#include "strata/nn/causal_lm.h"

#include <utility>

#include "strata/tensor/ops.h"

namespace strata::nn {

CausalLM::CausalLM(std::shared_ptr<LayerFactory> factory)
    : factory_(factory != nullptr ? std::move(factory) : default_layer_factory()) {}

Tensor CausalLM::forward(const Tensor& tokens, KVCache* cache) {
  return factory_->gather_logits(local_logits(tokens, cache), vocab_size());
}

Tensor CausalLM::loss(const Tensor& tokens, const Tensor& targets) {
  STRATA_CHECK(targets.shape() == tokens.shape(), "loss: targets shape ", targets.shape(),
               " differs from tokens shape ", tokens.shape());
  Tensor logits = local_logits(tokens, nullptr);
  const int64_t N = tokens.numel();
  return factory_->cross_entropy(logits.reshape({N, logits.size(-1)}), targets.reshape({N}), vocab_size());
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
