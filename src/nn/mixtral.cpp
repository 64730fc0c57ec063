#include "strata/nn/mixtral.h"

#include <utility>

#include "strata/ops.h"

namespace strata::nn {

MoEConfig MixtralConfig::moe() const {
  return {.hidden_size = llama.n_embd,
          .intermediate_size = llama.intermediate_size,
          .num_experts = num_experts,
          .top_k = top_k,
          .gating = gating,
          .normalize_gates = normalize_gates,
          .capacity_factor = capacity_factor,
          .aux_loss_coef = aux_loss_coef,
          .z_loss_coef = z_loss_coef,
          .expert_parallel_degree = expert_parallel_degree,
          .expert_parallel_rank = expert_parallel_rank};
}

void check_mixtral_config(const MixtralConfig& c, int64_t tp) {
  check_llama_config(c.llama, tp);
  check_moe_config(c.moe());
}

MixtralDecoderLayer::MixtralDecoderLayer(const MixtralConfig& config, int64_t layer_index, LayerFactory& factory) {
  const LlamaConfig& l = config.llama;
  const DType pd = l.parameter_dtype();
  // As every Linear of Llama: normal(0, init_std), drawn by name.
  const InitOptions init{.std = l.init_std, .dtype = pd, .linear_init = LinearInit::Normal, .by_name = true};
  input_layernorm = register_module("input_layernorm", std::make_shared<RMSNorm>(l.n_embd, l.rms_norm_eps, pd));
  self_attn = register_module("self_attn", std::make_shared<LlamaAttention>(l, layer_index, factory));
  post_attention_layernorm =
      register_module("post_attention_layernorm", std::make_shared<RMSNorm>(l.n_embd, l.rms_norm_eps, pd));
  block_sparse_moe = register_module("block_sparse_moe", std::make_shared<MoE>(config.moe(), init, &factory));
}

Tensor MixtralDecoderLayer::forward_block(const Tensor& x, const BlockInputs& in) {
  Tensor h = add(x, self_attn->forward(input_layernorm->forward(x), in.cos, in.sin, in.cache, in.context));
  return add(h, block_sparse_moe->forward(post_attention_layernorm->forward(h)));
}

namespace {
// Checks the config against the factory's degree before Llama's constructor builds anything.
std::shared_ptr<LayerFactory> checked(const MixtralConfig& config, std::shared_ptr<LayerFactory> factory) {
  check_mixtral_config(config, factory != nullptr ? factory->degree() : 1);
  return factory;
}
}  // namespace

Mixtral::Mixtral(const MixtralConfig& config, std::shared_ptr<LayerFactory> factory, ModelPart part)
    : Llama(config.llama, checked(config, std::move(factory)), std::move(part),
            [&config](int64_t index, LayerFactory& f) {
              return std::make_shared<MixtralDecoderLayer>(config, index, f);
            }),
      mixtral_config_(config) {}

std::vector<MoEStats> Mixtral::moe_stats() const {
  std::vector<MoEStats> out;
  for (int64_t i : *part().blocks)
    out.push_back(blocks().at<MixtralDecoderLayer>(static_cast<size_t>(i)).block_sparse_moe->stats());
  return out;
}

bool Mixtral::has_auxiliary_loss() const {
  return mixtral_config_.aux_loss_coef != 0.0 || mixtral_config_.z_loss_coef != 0.0;
}

double Mixtral::flops_per_step(int64_t batch, int64_t seq_len) const {
  const MixtralConfig& c = mixtral_config_;
  const double idle_experts = static_cast<double>(c.num_experts - c.top_k);
  const double expert_params = 3.0 * static_cast<double>(c.llama.n_embd * c.llama.intermediate_size);
  const double idle = idle_experts * expert_params * static_cast<double>(part().blocks->size());
  return Llama::flops_per_step(batch, seq_len) - 6.0 * idle * static_cast<double>(batch * seq_len);
}

ParameterCounts parameter_counts(const MixtralConfig& c) {
  ParameterCounts counts = parameter_counts(c.llama);
  const int64_t C = c.llama.n_embd, dense_mlp = 3 * C * c.llama.intermediate_size;
  counts.block += (c.num_experts - 1) * dense_mlp + C * c.num_experts;  // E experts and the router
  return counts;
}

}  // namespace strata::nn
