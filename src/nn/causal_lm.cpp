#include "strata/nn/causal_lm.h"

#include <utility>

#include "strata/autograd/checkpoint.h"
#include "strata/autograd/grad_mode.h"
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

Tensor CausalLM::local_logits(const Tensor& tokens, KVCache* cache) {
  auto hooks = forward_hooks();
  const int64_t offset = check_tokens(tokens, cache);
  const Positions positions{offset, tokens.size(1)};
  factory_->begin_forward(positions.length);
  Tensor x = embed(tokens, positions);
  const bool recompute = recompute_ && cache == nullptr && grad_enabled();
  for (int64_t i = 0; i < num_layers(); ++i) {
    if (recompute) {
      auto block = [this, i, positions](const std::vector<Tensor>& in) {
        factory_->begin_forward(positions.length);  // the same split when backward runs it again
        return std::vector<Tensor>{run_block(i, in[0], positions)};
      };
      x = autograd::checkpoint(block, {x}, block_generators())[0];
    } else {
      x = run_block(i, x, positions, cache);
    }
  }
  if (cache != nullptr) cache->advance(positions.length);
  return hooks.output(head(x));
}

int64_t CausalLM::check_tokens(const Tensor& tokens, const KVCache* cache) const {
  const char* model = family();
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
