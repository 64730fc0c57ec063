#pragma once
// A Mixtral-style decoder: nn::Llama (RMSNorm, rotary embeddings, grouped-query attention,
// untied head) with the SwiGLU MLP of every block replaced by a mixture of experts (nn::MoE).
// Parameter names are Hugging Face MixtralForCausalLM's checkpoint names without "model."
// ("layers.0.block_sparse_moe.gate.weight", "layers.0.block_sparse_moe.experts.3.w1.weight"),
// so export and import (checkpoint/hf_mixtral.h) only rename.
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "strata/nn/llama.h"
#include "strata/nn/moe.h"

namespace strata::nn {

struct MixtralConfig {
  LlamaConfig llama;                      // all but the MLP; llama.intermediate_size is each expert's width
  int64_t num_experts = 8;                // num_local_experts
  int64_t top_k = 2;                      // num_experts_per_tok
  MoEGating gating = MoEGating::Softmax;  // Mixtral: softmax, then the top k renormalised
  bool normalize_gates = true;
  std::optional<double> capacity_factor = std::nullopt;  // unset: dropless (Mixtral)
  double aux_loss_coef = 0.0;                            // router_aux_loss_coef (in MoE's normalisation: moe_routing.h)
  double z_loss_coef = 0.0;
  // Expert parallelism (parallel::expert_parallel_config): this rank builds experts
  // [rank * E / degree, (rank + 1) * E / degree) of every block, under their global names.
  int64_t expert_parallel_degree = 1;
  int64_t expert_parallel_rank = 0;
  MoEConfig moe() const;  // each block's
};

class MixtralDecoderLayer : public TransformerBlock {
 public:
  MixtralDecoderLayer(const MixtralConfig& config, int64_t layer_index, LayerFactory& factory);
  Tensor auxiliary_loss() const override { return block_sparse_moe->auxiliary_loss(); }
  std::shared_ptr<RMSNorm> input_layernorm;
  std::shared_ptr<LlamaAttention> self_attn;
  std::shared_ptr<RMSNorm> post_attention_layernorm;
  std::shared_ptr<MoE> block_sparse_moe;

 protected:
  Tensor forward_block(const Tensor& x, const BlockInputs& inputs) override;
};

class Mixtral : public Llama {
 public:
  // `factory`: as Llama's; under tensor parallelism each expert is split too (nn::MoE) and
  // the routers stay whole, with or without sequence parallelism. `part`: a pipeline stage, with
  // aux_loss_coef and z_loss_coef 0 (parallel::Pipeline refuses auxiliary losses).
  explicit Mixtral(const MixtralConfig& config, std::shared_ptr<LayerFactory> factory = nullptr, ModelPart part = {});
  const MixtralConfig& mixtral_config() const { return mixtral_config_; }
  MixtralDecoderLayer& layer(size_t i) { return blocks().at<MixtralDecoderLayer>(i); }  // by global index; checked
  // Each held block's MoE statistics of the last forward, in block order.
  std::vector<MoEStats> moe_stats() const;
  bool has_auxiliary_loss() const override;
  // As Llama's, with the experts a token runs (top_k of num_experts) in place of all of them.
  double flops_per_step(int64_t batch, int64_t seq_len) const override;

 protected:
  const char* family() const override { return "Mixtral"; }

 private:
  MixtralConfig mixtral_config_;
};

ParameterCounts parameter_counts(const MixtralConfig& config);

// check_llama_config's rules (the tensor-parallel degree divides intermediate_size, each
// expert's width, too) and the MoE's (check_moe_config).
void check_mixtral_config(const MixtralConfig& config, int64_t tp_degree = 1);

}  // namespace strata::nn
