#pragma once
// torch.nn.MultiheadAttention: project query, key and value, attend per head, project back.
// Parameters are named and laid out as torch's, so a state dict maps name for name:
//   in_proj_weight [3E, E] (q, k, v rows stacked), or q_proj_weight [E, E], k_proj_weight
//   [E, kdim], v_proj_weight [E, vdim] when kdim or vdim differs from E; in_proj_bias [3E];
//   out_proj.weight [E, E], out_proj.bias [E].
// Initialised as torch's: xavier-uniform projections, zero biases, out_proj.weight as Linear.
#include <cstdint>
#include <memory>
#include <optional>

#include "strata/core/random.h"
#include "strata/nn/layers.h"

namespace strata::nn {

struct MultiheadAttentionOptions {
  bool bias = true;
  double dropout = 0.0;  // on the attention weights, in training mode
  // true: query [B, L, E], key [B, S, kdim], value [B, S, vdim]; false: sequence first
  // ([L, B, E], ...). Unbatched inputs ([L, E], [S, kdim], [S, vdim]) are taken either way.
  bool batch_first = true;
  std::optional<int64_t> kdim = std::nullopt;  // key's feature size, E when unset
  std::optional<int64_t> vdim = std::nullopt;  // value's feature size, E when unset
  InitOptions init = {};                       // dtype, generator, by_name (std, linear_init unused)
  Generator* dropout_generator = nullptr;      // default generator when null
};

// What forward returns: the output shaped as the query, and the attention weights when asked
// for ([B, L, S] averaged over heads, else [B, H, L, S]; no batch dimension for unbatched
// input); undefined otherwise.
struct AttentionOutput {
  Tensor output;
  Tensor weights;
};

class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, MultiheadAttentionOptions options = {});

  // Masks are constants, as in torch: a Bool mask is true where a key is excluded, a floating
  // mask (of the query's dtype) is added to the scaled scores (-inf excludes).
  //   key_padding_mask [B, S] ([S] unbatched): per example, which keys are padding.
  //   attn_mask [L, S] (for every example and head) or [B * H, L, S] (torch's layout).
  // A query whose keys are all excluded gives NaN, as in torch. Without need_weights and
  // dropout the heads run through the fused attention op; otherwise scores, softmax, dropout
  // and the weighted sum are separate ops (the weights returned are after dropout, as torch's).
  AttentionOutput forward(const Tensor& query, const Tensor& key, const Tensor& value,
                          const Tensor& key_padding_mask = {}, const Tensor& attn_mask = {}, bool need_weights = false,
                          bool average_attn_weights = true);

  int64_t embed_dim() const { return embed_dim_; }
  int64_t num_heads() const { return num_heads_; }
  int64_t head_dim() const { return embed_dim_ / num_heads_; }
  const MultiheadAttentionOptions& options() const { return options_; }

  Tensor in_proj_weight;  // [3E, E], or undefined with kdim/vdim != E
  Tensor q_proj_weight;   // [E, E], only with kdim/vdim != E
  Tensor k_proj_weight;   // [E, kdim]
  Tensor v_proj_weight;   // [E, vdim]
  Tensor in_proj_bias;    // [3E], or undefined without bias
  std::shared_ptr<Linear> out_proj;

 private:
  int64_t embed_dim_;
  int64_t num_heads_;
  MultiheadAttentionOptions options_;
};

}  // namespace strata::nn
