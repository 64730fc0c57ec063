#pragma once
// What every decoder-only language model in nn (GPT, Llama) offers, so that training loops,
// generation and ZeRO-3's unit policy work with either without knowing which.
#include <cstdint>

#include "strata/nn/kv_cache.h"
#include "strata/nn/module.h"

namespace strata::nn {

// A transformer block: the unit ZeRO-3 gathers and frees by default
// (nn::is_transformer_block). Model blocks derive from it.
class TransformerBlock : public Module {};

class CausalLM : public Module {
 public:
  // tokens int64 [B, T] -> logits [B, T, vocab]. With a cache, the tokens continue the
  // cached sequence: they sit at positions cache->length() onwards, attend to the cached keys
  // and values, and append their own (the cache must be used with grad mode off).
  virtual Tensor forward(const Tensor& tokens, KVCache* cache) = 0;
  Tensor forward(const Tensor& tokens) { return forward(tokens, nullptr); }
  // Mean next-token cross-entropy over targets != -100; targets int64 [B, T].
  Tensor loss(const Tensor& tokens, const Tensor& targets);

  virtual int64_t vocab_size() const = 0;
  virtual int64_t context_length() const = 0;  // the longest sequence forward accepts
  virtual int64_t num_layers() const = 0;
  // A cache that holds up to context_length() positions of every layer.
  KVCache make_cache() const { return KVCache(num_layers(), context_length()); }

 protected:
  // Checks tokens [B, T] and that positions [offset, offset + T) fit the context; returns offset.
  int64_t check_tokens(const char* model, const Tensor& tokens, const KVCache* cache) const;
};

}  // namespace strata::nn
