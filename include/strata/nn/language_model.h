#pragma once
// What nn::generate and a training loop need from a language model, whoever wrote it: GPT and
// Llama (nn::CausalLM) implement it, and so can a model outside the library.
//
//   class MyModel : public nn::LanguageModel {
//    public:
//     int64_t vocab_size() const override { return 50; }
//     int64_t context_length() const override { return 64; }
//    protected:
//     Tensor forward_logits(const Tensor& tokens, nn::KVCache* cache) override;  // -> [B, T, 50]
//   };
//
// forward() runs the model's hooks around forward_logits (ZeRO-3 gathers the parameters in no
// unit there), so the model's own code runs none; its units are called through nn::call.
#include <cstdint>

#include "strata/nn/kv_cache.h"
#include "strata/nn/module.h"

namespace strata::nn {

class LanguageModel : public Module {
 public:
  // tokens int64 [B, T] -> logits [B, T, vocab_size()]. With a cache (models whose
  // cache_layers() > 0), the tokens continue the cached sequence: they sit at positions
  // cache->length() onwards, attend to the cached keys and values, and append their own.
  Tensor forward(const Tensor& tokens, KVCache* cache = nullptr) {
    return call_with_hooks([&] { return forward_logits(tokens, cache); });
  }
  virtual int64_t vocab_size() const = 0;
  virtual int64_t context_length() const = 0;  // the longest sequence forward accepts
  // Layers whose keys and values forward keeps in a KVCache; 0 (the default): forward takes
  // no cache, and generate runs the whole sequence at every step.
  virtual int64_t cache_layers() const { return 0; }
  // A cache that holds up to context_length() positions of every cached layer.
  KVCache make_cache() const;

 protected:
  virtual Tensor forward_logits(const Tensor& tokens, KVCache* cache) = 0;
};

}  // namespace strata::nn
