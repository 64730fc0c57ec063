#pragma once
// What every decoder-only language model in nn (GPT, Llama) offers, so that training loops,
// generation and ZeRO-3's unit policy work with either without knowing which.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include "strata/core/type_name.h"
#include "strata/nn/context_split.h"
#include "strata/nn/kv_cache.h"
#include "strata/nn/language_model.h"
#include "strata/nn/layer_factory.h"
#include "strata/nn/module.h"

namespace strata::nn {

// What a block's forward takes besides its input.
struct BlockInputs {
  Tensor cos, sin;                  // rotary tables for the positions of x (Llama); undefined for GPT
  KVCache* cache = nullptr;         // generation: the cached keys and values (see LanguageModel::forward)
  ContextSplit* context = nullptr;  // context parallelism: attention over the whole sequence
};

// A transformer block: the unit ZeRO-3 gathers and frees by default
// (nn::is_transformer_block). Model blocks derive from it and implement forward_block; it is
// called through operator(), which runs the forward hooks around it (ZeRO-3 gathers the
// block's parameters there), so a block's own code never runs hooks.
class TransformerBlock : public Module {
 public:
  Tensor operator()(const Tensor& x, const BlockInputs& inputs);
  // A term its last forward adds to the model's loss ([], in that forward's graph: a
  // mixture of experts' load-balancing and z-losses), or undefined for none (the default).
  virtual Tensor auxiliary_loss() const { return {}; }

 protected:
  virtual Tensor forward_block(const Tensor& x, const BlockInputs& inputs) = 0;
};

// The blocks a model (or a part of one) holds, each named by its index in the whole model:
// "0", "1", ... ("4", "5" for a pipeline stage holding blocks 4 and 5). One container for
// every model family (GPT's "h", Llama's "layers").
class BlockList : public Module {
 public:
  void add(int64_t index, std::shared_ptr<TransformerBlock> block);
  size_t size() const { return count_; }       // blocks held
  TransformerBlock& operator[](size_t index);  // by index in the whole model; checked
  template <class B>
  B& at(size_t index) {
    auto* typed = dynamic_cast<B*>(&(*this)[index]);
    STRATA_CHECK(typed != nullptr, "BlockList: block ", index, " is a ", dynamic_type_name((*this)[index]), ", not a ",
                 demangled_name(typeid(B)));
    return *typed;
  }

 private:
  std::vector<std::shared_ptr<TransformerBlock>> blocks_;  // by index in the whole model, null where not held
  size_t count_ = 0;
};

// Which pieces of a model one process builds (pipeline parallelism: parallel/pipeline.h
// gives each rank its part): the token embedding, some blocks, the final norm and head.
// Parameters keep the names and the initial values they have in the whole model (each is
// drawn from the model's seed and its own name, whatever else the part holds).
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

// vocab_size rounded up to a multiple of `multiple` (>= 1): a padded vocabulary
// (config.padded_vocab_size), as llm.c and Megatron pad GPT-2's 50257 words to 50304 so that
// the head's GEMMs run on aligned kernels. 1 gives vocab_size back.
int64_t pad_vocab_size(int64_t vocab_size, int64_t multiple);

// The rows a family's token embedding and head hold: padded_vocab_size, or vocab_size when
// it is 0. Checks it is 0 or >= vocab_size; errors name `family` and both sizes.
int64_t vocab_rows(const char* family, int64_t vocab_size, int64_t padded_vocab_size);

// Checks the dtypes a family's config names: activations in float32 or float64; parameters
// in that dtype, or in bfloat16/float16 with float32 activations. Errors name `family`.
void check_model_dtypes(const char* family, DType dtype, DType param_dtype);

// forward (LanguageModel's) takes a whole model only; the cache must be used with grad mode
// off. A tensor-parallel model gathers the vocabulary parts there (loss() never does).
class CausalLM : public LanguageModel {
 public:
  // Mean next-token cross-entropy over targets != -100; targets int64 [B, T]; plus the
  // blocks' auxiliary losses (TransformerBlock::auxiliary_loss) of that forward.
  Tensor loss(const Tensor& tokens, const Tensor& targets);
  // The sum of the blocks' auxiliary losses in the last local_logits (undefined: none).
  const Tensor& auxiliary_loss() const { return aux_loss_; }
  // Whether the blocks add auxiliary losses (parallel::Pipeline refuses such a model: its
  // stages compute the loss from the head alone).
  virtual bool has_auxiliary_loss() const { return false; }

  // The sizes every family has (from its config).
  struct Sizes {
    int64_t vocab_size = 0;
    int64_t padded_vocab = 0;      // rows of the token embedding and head (0: vocab_size)
    int64_t context = 0;           // the longest sequence forward accepts
    int64_t num_layers = 0;        // of the whole model, also for a part
    int64_t hidden_size = 0;       // the width of the hidden states blocks exchange
    DType dtype = DType::Float32;  // of activations
  };
  int64_t vocab_size() const override { return sizes_.vocab_size; }
  // The rows of the token embedding and head: vocab_size() or more (a padded vocabulary).
  // Padding rows start at zero and stay zero in training: no token looks them up, and
  // their logits take no part in loss() (gradient 0) nor appear in forward()'s logits, so
  // generation never picks one. local_logits() and head() still return them.
  int64_t padded_vocab_size() const { return sizes_.padded_vocab > 0 ? sizes_.padded_vocab : sizes_.vocab_size; }
  int64_t context_length() const override { return sizes_.context; }
  int64_t cache_layers() const override { return sizes_.num_layers; }
  int64_t num_layers() const { return sizes_.num_layers; }
  int64_t hidden_size() const { return sizes_.hidden_size; }
  DType compute_dtype() const { return sizes_.dtype; }
  // Parameters a part with the embedding and a part with the head both hold, as the same
  // tensor in the whole model (GPT's tied token embedding; none for Llama). A pipeline sums
  // their gradients over the two stages.
  virtual std::vector<std::string> tied_parameters() const { return {}; }

  const ModelPart& part() const { return part_; }  // its blocks always listed
  bool is_whole() const;
  bool has_block(int64_t index) const;
  // The factory the model's split layers came from (single-process unless given one).
  LayerFactory& layer_factory() const { return *factory_; }

  // Context parallelism (nn/context_split.h; null: none): forward, loss() and the pieces take
  // this rank's tokens [B, T / degree] of sequences of T positions; attention spans all of
  // them. Not with a KV cache. The split must outlive its use.
  void set_context_split(std::shared_ptr<ContextSplit> split) { context_ = std::move(split); }
  ContextSplit* context_split() const { return context_.get(); }
  int64_t context_degree() const { return context_ ? context_->degree() : 1; }

  // Activation recompute: each block keeps only its input from forward and runs again in
  // backward (autograd::checkpoint), trading a second forward of the blocks for their
  // activations. Results are bit-identical. Off by default; not with ZeRO-3 units.
  void set_recompute(bool on) { recompute_ = on; }
  bool recompute() const { return recompute_; }

  // The model in pieces, as forward() runs them and as pipeline stages split them: embed,
  // each block in turn, then head. `positions` are those of the tokens, [offset, offset +
  // length) (the whole sequence, also when sequence or context parallelism splits the hidden
  // states).
  struct Positions {
    int64_t offset = 0;
    int64_t length = 0;
  };
  virtual Tensor embed(const Tensor& tokens, Positions positions) = 0;  // -> hidden [B, T, C]
  Tensor run_block(int64_t index, const Tensor& hidden, Positions positions, KVCache* cache = nullptr);
  virtual Tensor head(const Tensor& hidden) = 0;  // final norm and head -> this rank's logits
  // Blocks `indices` in turn (global indices this part holds), each recomputed in backward
  // when recompute() is on and no cache is given.
  Tensor run_blocks(std::span<const int64_t> indices, Tensor hidden, Positions positions, KVCache* cache = nullptr);
  // Logits of this rank's part of the vocabulary, [B, T, part] (the whole vocabulary in one
  // process): the pieces in order, with recompute when it is on. forward() and loss() call it.
  Tensor local_logits(const Tensor& tokens, KVCache* cache);
  // Checks tokens [B, T] and that positions [offset, offset + T) fit the context; returns offset.
  int64_t check_tokens(const Tensor& tokens, const KVCache* cache) const;

  // The blocks this part holds (its children "h" or "layers").
  BlockList& blocks() const { return *blocks_; }

  // The modules a model family builds, handed to the base constructor, which registers them
  // in this order (before, then the BlockList, then after), draws every parameter made with
  // InitOptions::by_name from (seed, its full name), and tells the layer factory the model
  // is built. Null entries (pieces this part does not hold) are skipped.
  struct Pieces {
    using Entry = std::pair<std::string, std::shared_ptr<Module>>;
    std::vector<Entry> before;
    std::string blocks_name;  // "h", "layers"
    std::vector<std::pair<int64_t, std::shared_ptr<TransformerBlock>>> blocks;
    std::vector<Entry> after;
    // Weights whose rows are the (padded) vocabulary, this rank's rows from
    // factory.vocab_start(): rows past vocab_size are zeroed after initialisation.
    std::vector<Tensor> vocab_tables;
  };
  // Builds the pieces of `part` (resolved: its blocks listed) with `factory`.
  using PieceBuilder = std::function<Pieces(const ModelPart& part, LayerFactory& factory)>;

 protected:
  // `part` is resolved against `num_layers` (checked: ascending, existing blocks).
  CausalLM(std::shared_ptr<LayerFactory> factory, ModelPart part, Sizes sizes, uint64_t seed,
           const PieceBuilder& build);
  Tensor forward_logits(const Tensor& tokens, KVCache* cache) override;
  virtual const char* family() const = 0;  // "GPT", for messages
  // Generators that blocks draw from besides the default one (restored when recompute runs a
  // block again).
  virtual std::vector<Generator*> block_generators() { return {}; }
  // What every block of a forward over `positions` takes (Llama adds its rotary tables).
  virtual BlockInputs block_inputs(Positions /*positions*/, Device /*device*/, KVCache* cache) {
    return {.cos = {}, .sin = {}, .cache = cache};
  }
  // The registered piece `name` as an M, or null where this part does not hold it.
  template <class M>
  std::shared_ptr<M> piece(const std::string& name) const {
    for (const auto& [n, m] : child_entries())
      if (n == name) return std::dynamic_pointer_cast<M>(m);
    return nullptr;
  }
  std::shared_ptr<LayerFactory> factory_;
  std::shared_ptr<ContextSplit> context_;
  ModelPart part_;

 private:
  void resolve_part(int64_t num_layers);
  void zero_vocab_padding(const std::vector<Tensor>& tables);
  void add_auxiliary_loss(const Tensor& term);
  Sizes sizes_;
  std::shared_ptr<BlockList> blocks_;
  bool recompute_ = false;
  Tensor aux_loss_;
};

}  // namespace strata::nn
