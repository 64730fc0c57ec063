#pragma once
// A GPT-2 style decoder: learned positions, pre-LayerNorm blocks, GELU MLP, causal
// self-attention, final LayerNorm and a head tied to the token embedding. Parameter names
// match the Hugging Face GPT-2 checkpoint (without its "transformer." prefix); Linear
// weights are [out, in] here, where HF's Conv1D stores [in, out] (the exporter transposes).
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "strata/nn/causal_lm.h"
#include "strata/nn/layers.h"

namespace strata::nn {

struct GPTConfig {
  int64_t vocab_size = 256;
  // Rows of the token embedding and head: 0 (or vocab_size) for none, else >= vocab_size
  // (nn::pad_vocab_size rounds up to a multiple; 128 keeps the head's GEMMs aligned on GPUs).
  // Padding rows start at zero and stay zero: never looked up, never predicted, no part in
  // the loss (CausalLM::padded_vocab_size).
  int64_t padded_vocab_size = 0;
  int64_t context = 128;  // n_positions
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 256;
  double dropout = 0.0;
  uint64_t seed = 1337;          // parameter initialisation
  DType dtype = DType::Float32;  // activations (float32 or float64), and parameters by default
  // Mixed precision: parameters (and their gradients) stored in bfloat16 or float16 while
  // the model computes in float32 (dtype must then be float32). Each layer casts its
  // parameters to float32 at use; the initial values are the float32 model's, rounded.
  // Optimizers update float32/float64 only: train such a model with ZeroOptimizer, whose
  // float32 master weights are the supported path. Unset: parameters in `dtype`.
  std::optional<DType> param_dtype = std::nullopt;
  DType parameter_dtype() const { return param_dtype.value_or(dtype); }
};

class CausalSelfAttention : public Module {
 public:
  CausalSelfAttention(const GPTConfig& config, int64_t layer_index, LayerFactory& factory);
  // [B, T, C] -> [B, T, C]; with a cache, x continues the cached positions (see CausalLM);
  // with a context split, x holds this rank's positions and attention spans all of them.
  Tensor forward(const Tensor& x, KVCache* cache = nullptr, ContextSplit* context = nullptr);
  std::shared_ptr<Linear> c_attn;  // C -> 3C (q, k, v; column-parallel by head)
  std::shared_ptr<Linear> c_proj;  // C -> C (row-parallel)
  std::shared_ptr<Dropout> resid_dropout;
  int64_t n_head;       // this rank's heads (all of them without tensor parallelism)
  int64_t layer_index;  // this layer's slot in a KVCache
  LayerFactory& factory;
};

class MLP : public Module {
 public:
  MLP(const GPTConfig& config, LayerFactory& factory);
  Tensor forward(const Tensor& x);
  std::shared_ptr<Linear> c_fc;    // C -> 4C (column-parallel)
  std::shared_ptr<Linear> c_proj;  // 4C -> C (row-parallel)
  std::shared_ptr<Dropout> dropout;
  LayerFactory& factory;
};

class Block : public TransformerBlock {
 public:
  Block(const GPTConfig& config, int64_t layer_index, LayerFactory& factory);
  // Runs the block with its hooks (TransformerBlock::operator()).
  Tensor forward(const Tensor& x, KVCache* cache = nullptr) {
    return (*this)(x, {.cos = {}, .sin = {}, .cache = cache});
  }
  std::shared_ptr<LayerNorm> ln_1;
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<LayerNorm> ln_2;
  std::shared_ptr<MLP> mlp;

 protected:
  Tensor forward_block(const Tensor& x, const BlockInputs& inputs) override;
};

// Parameters per piece of the whole model (nn::ParameterCounts, causal_lm.h).
ParameterCounts parameter_counts(const GPTConfig& config);

class GPT : public CausalLM {
 public:
  // `factory` makes the layers tensor parallelism splits (parallel::TensorParallelFactory;
  // default: one process). Its degree must divide n_head. `part`: the pieces to build (a
  // pipeline stage); a part with the head holds the token embedding too (tied), as "wte".
  explicit GPT(const GPTConfig& config, std::shared_ptr<LayerFactory> factory = nullptr, ModelPart part = {});
  const GPTConfig& config() const { return config_; }
  Block& block(size_t i) { return blocks().at<Block>(i); }  // by index in the whole model; checked
  std::vector<std::string> tied_parameters() const override { return {"wte.weight"}; }
  // Training FLOPs of one step on `tokens` tokens of length `seq_len`: 6 x (non-embedding
  // params + the tied head) x tokens, plus attention (as in the PaLM appendix, causal half
  // not subtracted).
  double flops_per_step(int64_t batch, int64_t seq_len) const;

  // Null where the part does not hold them: wpe and drop without the embedding, ln_f without
  // the head, wte without either.
  std::shared_ptr<Embedding> wte;  // also the output head (tied)
  std::shared_ptr<Embedding> wpe;
  std::shared_ptr<Dropout> drop;
  std::shared_ptr<BlockList> h;  // the blocks this part holds (Block)
  std::shared_ptr<LayerNorm> ln_f;

  Tensor embed(const Tensor& tokens, Positions positions) override;
  Tensor head(const Tensor& hidden) override;

 protected:
  const char* family() const override { return "GPT"; }
  std::vector<Generator*> block_generators() override;

 private:
  GPTConfig config_;
};

}  // namespace strata::nn
