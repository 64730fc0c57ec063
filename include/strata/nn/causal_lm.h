#pragma once
// What every decoder-only language model in nn (GPT, Llama) offers, so that training loops,
// generation and ZeRO-3's unit policy work with either without knowing which.
#include <cstdint>
#include <memory>
#include <vector>

#include "strata/nn/kv_cache.h"
#include "strata/nn/layer_factory.h"
#include "strata/nn/module.h"

namespace strata::nn {

// A transformer block: the unit ZeRO-3 gathers and frees by default
// (nn::is_transformer_block). Model blocks derive from it.
class TransformerBlock : public Module {};

class CausalLM : public Module {
 public:
  // tokens int64 [B, T] -> logits [B, T, vocab]. With a cache, the tokens continue the
  // cached sequence: they sit at positions cache->length() onwards, attend to the cached keys
  // and values, and append their own (the cache must be used with grad mode off). A
  // tensor-parallel model gathers the vocabulary parts here (loss() never does).
  Tensor forward(const Tensor& tokens, KVCache* cache = nullptr);
  // Mean next-token cross-entropy over targets != -100; targets int64 [B, T].
  Tensor loss(const Tensor& tokens, const Tensor& targets);

  virtual int64_t vocab_size() const = 0;
  virtual int64_t context_length() const = 0;  // the longest sequence forward accepts
  virtual int64_t num_layers() const = 0;
  // A cache that holds up to context_length() positions of every layer.
  KVCache make_cache() const { return KVCache(num_layers(), context_length()); }
  // The factory the model's split layers came from (single-process unless given one).
  LayerFactory& layer_factory() const { return *factory_; }

  // Activation recompute: each block keeps only its input from forward and runs again in
  // backward (autograd::checkpoint), trading a second forward of the blocks for their
  // activations. Results are bit-identical. Off by default; not with ZeRO-3 units.
  void set_recompute(bool on) { recompute_ = on; }
  bool recompute() const { return recompute_; }

  // The model in pieces, as forward() runs them and as pipeline stages split them: embed,
  // each block in turn, then head. `positions` are those of the tokens, [offset, offset +
  // length) (the whole sequence, also when sequence parallelism splits the hidden states).
  struct Positions {
    int64_t offset = 0;
    int64_t length = 0;
  };
  virtual Tensor embed(const Tensor& tokens, Positions positions) = 0;  // -> hidden [B, T, C]
  virtual Tensor run_block(int64_t index, const Tensor& hidden, Positions positions, KVCache* cache = nullptr) = 0;
  virtual Tensor head(const Tensor& hidden) = 0;  // final norm and head -> this rank's logits
  // Logits of this rank's part of the vocabulary, [B, T, part] (the whole vocabulary in one
  // process): the pieces in order, with recompute when it is on. forward() and loss() call it.
  Tensor local_logits(const Tensor& tokens, KVCache* cache);

 protected:
  explicit CausalLM(std::shared_ptr<LayerFactory> factory);
  virtual const char* family() const = 0;  // "GPT", for messages
  // Generators that blocks draw from besides the default one (restored when recompute runs a
  // block again).
  virtual std::vector<Generator*> block_generators() { return {}; }
  // Checks tokens [B, T] and that positions [offset, offset + T) fit the context; returns offset.
  int64_t check_tokens(const Tensor& tokens, const KVCache* cache) const;
  std::shared_ptr<LayerFactory> factory_;

 private:
  bool recompute_ = false;
};

}  // namespace strata::nn
