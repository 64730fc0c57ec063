#pragma once
// A LLaMA-family decoder: RMSNorm before attention and MLP, rotary position embeddings
// (Hugging Face's rotate_half layout), grouped-query attention (n_kv_head key/value heads
// shared by n_head query heads), a SwiGLU MLP and an untied output head; no biases, no
// dropout. Parameter names are Hugging Face LlamaForCausalLM's without the "model." prefix
// ("layers.0.self_attn.q_proj.weight", "lm_head.weight"), with the same [out, in] layouts,
// so export and import (checkpoint/hf_llama.h) only rename.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "strata/nn/causal_lm.h"
#include "strata/nn/layers.h"
#include "strata/ops/nn_functional.h"

namespace strata::nn {

struct LlamaConfig {
  int64_t vocab_size = 256;
  // Rows of the token embedding and head: 0 (or vocab_size) for none, else >= vocab_size
  // (nn::pad_vocab_size rounds up to a multiple; 128 keeps the head's GEMMs aligned on GPUs).
  // Padding rows start at zero and stay zero: never looked up, never predicted, no part in
  // the loss (CausalLM::padded_vocab_size).
  int64_t padded_vocab_size = 0;
  int64_t context = 128;            // max_position_embeddings
  int64_t n_layer = 4;              // num_hidden_layers
  int64_t n_head = 4;               // num_attention_heads
  int64_t n_kv_head = 2;            // num_key_value_heads; divides n_head (== n_head: multi-head attention)
  int64_t n_embd = 256;             // hidden_size; head_dim = n_embd / n_head, even
  int64_t intermediate_size = 688;  // SwiGLU width (LLaMA: about 8/3 n_embd)
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-5;
  double init_std = 0.02;        // initializer_range: every Linear and the embedding draw normal(0, init_std)
  uint64_t seed = 1337;          // parameter initialisation
  DType dtype = DType::Float32;  // activations (float32 or float64), and parameters by default
  // 16-bit parameters (bfloat16/float16) computed in float32, as GPTConfig::param_dtype.
  std::optional<DType> param_dtype = std::nullopt;
  DType parameter_dtype() const { return param_dtype.value_or(dtype); }
  int64_t head_dim() const { return n_embd / n_head; }
};

class LlamaAttention : public Module {
 public:
  LlamaAttention(const LlamaConfig& config, int64_t layer_index, LayerFactory& factory);
  // x [B, T, C]; cos and sin [T, head_dim] for the positions of x -> [B, T, C]. With a
  // context split, x holds this rank's positions and attention spans all of them.
  Tensor forward(const Tensor& x, const Tensor& cos, const Tensor& sin, KVCache* cache = nullptr,
                 ContextSplit* context = nullptr);
  std::shared_ptr<Linear> q_proj;       // C -> n_head * head_dim (column-parallel by head)
  std::shared_ptr<Linear> k_proj;       // C -> n_kv_head * head_dim (column-parallel by head)
  std::shared_ptr<Linear> v_proj;       // C -> n_kv_head * head_dim (column-parallel by head)
  std::shared_ptr<Linear> o_proj;       // n_head * head_dim -> C (row-parallel)
  int64_t n_head, n_kv_head, head_dim;  // this rank's heads (all without tensor parallelism)
  int64_t layer_index;                  // this layer's slot in a KVCache
  LayerFactory& factory;
};

// down_proj(silu(gate_proj(x)) * up_proj(x)).
class LlamaMLP : public Module {
 public:
  LlamaMLP(const LlamaConfig& config, LayerFactory& factory);
  Tensor forward(const Tensor& x);
  std::shared_ptr<Linear> gate_proj;  // C -> intermediate (column-parallel)
  std::shared_ptr<Linear> up_proj;    // C -> intermediate (column-parallel)
  std::shared_ptr<Linear> down_proj;  // intermediate -> C (row-parallel)
  LayerFactory& factory;
};

class LlamaDecoderLayer : public TransformerBlock {
 public:
  LlamaDecoderLayer(const LlamaConfig& config, int64_t layer_index, LayerFactory& factory);
  // Runs the layer with its hooks (TransformerBlock::operator()).
  Tensor forward(const Tensor& x, const Tensor& cos, const Tensor& sin, KVCache* cache = nullptr) {
    return (*this)(x, {.cos = cos, .sin = sin, .cache = cache});
  }
  std::shared_ptr<RMSNorm> input_layernorm;
  std::shared_ptr<LlamaAttention> self_attn;
  std::shared_ptr<RMSNorm> post_attention_layernorm;
  std::shared_ptr<LlamaMLP> mlp;

 protected:
  Tensor forward_block(const Tensor& x, const BlockInputs& inputs) override;
};

class Llama : public CausalLM {
 public:
  // Makes block `index` of the whole model (a derived family's own block type).
  using BlockBuilder = std::function<std::shared_ptr<TransformerBlock>(int64_t index, LayerFactory& factory)>;
  // `factory` makes the layers tensor parallelism splits (parallel::TensorParallelFactory;
  // default: one process). Its degree must divide n_head, n_kv_head and intermediate_size.
  // `part`: the pieces to build (a pipeline stage).
  explicit Llama(const LlamaConfig& config, std::shared_ptr<LayerFactory> factory = nullptr, ModelPart part = {});
  const LlamaConfig& config() const { return config_; }
  LlamaDecoderLayer& layer(size_t i) {
    return blocks().at<LlamaDecoderLayer>(i);
  }  // by index in the whole model; checked
  // Training FLOPs of one step: 6 x (parameters but the embedding) x tokens, plus attention
  // (12 x layers x batch x seq^2 x n_embd, as GPT::flops_per_step).
  virtual double flops_per_step(int64_t batch, int64_t seq_len) const;

  // Null where the part does not hold them (embed_tokens without the embedding, norm and
  // lm_head without the head). `layers` names each layer by its index in the whole model.
  std::shared_ptr<Embedding> embed_tokens;
  std::shared_ptr<BlockList> layers;  // LlamaDecoderLayer
  std::shared_ptr<RMSNorm> norm;
  std::shared_ptr<Linear> lm_head;

  Tensor embed(const Tensor& tokens, Positions positions) override;
  Tensor head(const Tensor& hidden) override;

 protected:
  // For families built like Llama with their own blocks (nn::Mixtral): `block` makes block
  // `index` of the whole model.
  Llama(const LlamaConfig& config, std::shared_ptr<LayerFactory> factory, ModelPart part, const BlockBuilder& block);
  const char* family() const override { return "Llama"; }
  BlockInputs block_inputs(Positions positions, Device device, KVCache* cache) override;

 private:
  // The rotary tables of the last positions asked for (every block of a forward shares them).
  const RotaryTables& rotary_for(Positions positions, Device device);
  LlamaConfig config_;
  Positions rope_positions_{-1, -1};
  RotaryTables rope_;
};

// Parameters per piece of the whole model (nn::ParameterCounts, causal_lm.h).
ParameterCounts parameter_counts(const LlamaConfig& config);

// Checks a config's sizes and dtypes, and that the tensor-parallel degree divides what it
// splits; errors name the field (Llama's constructor calls it).
void check_llama_config(const LlamaConfig& config, int64_t tp_degree = 1);

}  // namespace strata::nn
