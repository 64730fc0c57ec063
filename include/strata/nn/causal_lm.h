#pragma once
// What every decoder-only language model in nn (GPT, Llama) offers, so that training loops,
// generation and ZeRO-3's unit policy work with either without knowing which.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "strata/nn/kv_cache.h"
#include "strata/nn/layer_factory.h"
#include "strata/nn/module.h"

namespace strata::nn {

// A transformer block: the unit ZeRO-3 gathers and frees by default
// (nn::is_transformer_block). Model blocks derive from it.
class TransformerBlock : public Module {};

// Which pieces of a model one process builds (pipeline parallelism: parallel/pipeline.h
// gives each rank its part): the token embedding, some blocks, the final norm and head.
// Parameters keep the names and the initial values they have in the whole model: blocks
// that are not built still advance the initialisation stream as if they were.
struct ModelPart {
  bool embedding = true;
  // Global block indices, ascending; unset: every block.
  std::optional<std::vector<int64_t>> blocks = std::nullopt;
  bool head = true;  // the final norm and the output head (GPT: with its tied token embedding)
};

// Parameters per piece of a whole model, from its config alone (parameter_counts(config) in
// gpt.h, llama.h): a pipeline balances its stages with them before building anything.
struct ParameterCounts {
  int64_t embedding = 0;  // the token (and position) embeddings
  int64_t block = 0;      // one block (every block is alike)
  int64_t head = 0;       // the final norm and head (GPT: the tied token embedding's copy)
};

class CausalLM : public Module {
 public:
  // tokens int64 [B, T] -> logits [B, T, vocab] (a whole model only). With a cache, the tokens continue the
  // cached sequence: they sit at positions cache->length() onwards, attend to the cached keys
  // and values, and append their own (the cache must be used with grad mode off). A
  // tensor-parallel model gathers the vocabulary parts here (loss() never does).
  Tensor forward(const Tensor& tokens, KVCache* cache = nullptr);
  // Mean next-token cross-entropy over targets != -100; targets int64 [B, T].
  Tensor loss(const Tensor& tokens, const Tensor& targets);

  virtual int64_t vocab_size() const = 0;
  virtual int64_t context_length() const = 0;  // the longest sequence forward accepts
  virtual int64_t num_layers() const = 0;  // of the whole model, also for a part
  virtual int64_t hidden_size() const = 0;  // the width of the hidden states blocks exchange
  virtual DType compute_dtype() const = 0;  // the dtype of activations
  // Parameters a part with the embedding and a part with the head both hold, as the same
  // tensor in the whole model (GPT's tied token embedding; none for Llama). A pipeline sums
  // their gradients over the two stages.
  virtual std::vector<std::string> tied_parameters() const { return {}; }

  const ModelPart& part() const { return part_; }  // its blocks always listed
  bool is_whole() const;
  bool has_block(int64_t index) const;
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
  // Blocks `indices` in turn (global indices this part holds), each recomputed in backward
  // when recompute() is on and no cache is given.
  Tensor run_blocks(std::span<const int64_t> indices, Tensor hidden, Positions positions, KVCache* cache = nullptr);
  // Logits of this rank's part of the vocabulary, [B, T, part] (the whole vocabulary in one
  // process): the pieces in order, with recompute when it is on. forward() and loss() call it.
  Tensor local_logits(const Tensor& tokens, KVCache* cache);
  // Checks tokens [B, T] and that positions [offset, offset + T) fit the context; returns offset.
  int64_t check_tokens(const Tensor& tokens, const KVCache* cache) const;

 protected:
  // `part` is resolved against `num_layers` (checked: ascending, existing blocks).
  CausalLM(std::shared_ptr<LayerFactory> factory, ModelPart part, int64_t num_layers);
  virtual const char* family() const = 0;  // "GPT", for messages
  // Generators that blocks draw from besides the default one (restored when recompute runs a
  // block again).
  virtual std::vector<Generator*> block_generators() { return {}; }
  // For a piece this part does not build: advances `gen` by the draws `build` makes (run on
  // a scratch copy; a piece's draws do not depend on its sizes, so `build` may make a tiny
  // one), so that the pieces built after it draw what they draw in the whole model.
  static void skip_draws(Generator& gen, const std::function<void(Generator&)>& build);
  std::shared_ptr<LayerFactory> factory_;
  ModelPart part_;

 private:
  bool recompute_ = false;
};

}  // namespace strata::nn
