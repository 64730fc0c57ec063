#include "strata/nn/multihead_attention.h"

#include <cmath>
#include <limits>
#include <vector>

#include "strata/ops.h"
#include "strata/tensor/factory.h"

namespace strata::nn {
namespace {

// torch's xavier_uniform_: uniform(-a, a), a = sqrt(6 / (fan_in + fan_out)).
ParamInit xavier_uniform(int64_t fan_out, int64_t fan_in) {
  return {.kind = ParamInit::Kind::Uniform, .scale = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out))};
}

// out_proj: a Linear whose weight draws as torch.nn.Linear's and whose bias starts at zero
// (MultiheadAttention._reset_parameters zeroes it), with by-name recipes that say so.
class OutProjection : public Linear {
 public:
  OutProjection(int64_t dim, bool with_bias, const InitOptions& init)
      : Linear(
            initial_value({dim, dim}, linear_weight_init(dim, {.linear_init = LinearInit::KaimingUniform}), init),
            with_bias ? initial_value({dim}, {.kind = ParamInit::Kind::Constant, .scale = 0.0}, init) : InitialValue{},
            init.by_name) {}
};

// Sizes of one forward, batch first: query [B, L, E], key [B, S, kdim], value [B, S, vdim].
struct Dims {
  int64_t batch, target, source;
};

// The masks as one additive mask broadcastable to the scores [B, H, L, S], undefined when
// neither is given. Bool true (excluded) becomes -inf; floating masks are added as they are.
class MaskBuilder {
 public:
  MaskBuilder(DType dtype, Dims d, int64_t heads, bool batched)
      : dtype_(dtype), d_(d), heads_(heads), batched_(batched) {}

  Tensor combine(const Tensor& key_padding_mask, const Tensor& attn_mask) const {
    Tensor padding, attn;
    if (key_padding_mask.defined()) padding = padding_mask(key_padding_mask);
    if (attn_mask.defined()) attn = attention_mask(attn_mask);
    if (padding.defined() && attn.defined()) return add(padding, attn);
    return padding.defined() ? padding : attn;
  }

 private:
  Tensor additive(const Tensor& mask, const char* name) const {
    STRATA_CHECK(mask.dtype() == DType::Bool || mask.dtype() == dtype_, "MultiheadAttention: ", name, " has dtype ",
                 mask.dtype(), " (shape ", mask.shape(), "); it must be Bool (true = excluded) or the query's ",
                 dtype_);
    STRATA_CHECK(!mask.requires_grad(), "MultiheadAttention: ", name,
                 " requires grad, but masks are constants here (no gradient reaches them); pass it detached");
    if (mask.dtype() != DType::Bool) return mask;
    return masked_fill(zeros(mask.shape(), {.dtype = dtype_, .device = mask.device()}), mask,
                       -std::numeric_limits<double>::infinity());
  }

  Tensor padding_mask(const Tensor& mask) const {
    const Shape want = batched_ ? Shape{d_.batch, d_.source} : Shape{d_.source};
    STRATA_CHECK(mask.shape() == want, "MultiheadAttention: key_padding_mask has shape ", mask.shape(),
                 " but should be ", want, batched_ ? " ([batch, source length])" : " ([source length])");
    return additive(mask, "key_padding_mask").reshape({d_.batch, 1, 1, d_.source});
  }

  Tensor attention_mask(const Tensor& mask) const {
    const Shape shared{d_.target, d_.source};
    const Shape per_head{d_.batch * heads_, d_.target, d_.source};
    STRATA_CHECK(mask.shape() == shared || mask.shape() == per_head, "MultiheadAttention: attn_mask has shape ",
                 mask.shape(), " but should be ", shared, " ([target length, source length]) or ", per_head,
                 batched_ ? " ([batch * heads, target length, source length])" : " ([heads, target, source])");
    Tensor m = additive(mask, "attn_mask");
    return mask.dim() == 2 ? m.reshape({1, 1, d_.target, d_.source})
                           : m.reshape({d_.batch, heads_, d_.target, d_.source});
  }

  DType dtype_;
  Dims d_;
  int64_t heads_;
  bool batched_;
};

}  // namespace

MultiheadAttention::MultiheadAttention(int64_t embed_dim, int64_t num_heads, MultiheadAttentionOptions options)
    : embed_dim_(embed_dim), num_heads_(num_heads), options_(options) {
  STRATA_CHECK(embed_dim > 0 && num_heads > 0, "MultiheadAttention: embed_dim (", embed_dim, ") and num_heads (",
               num_heads, ") must be positive");
  STRATA_CHECK(embed_dim % num_heads == 0, "MultiheadAttention: embed_dim ", embed_dim,
               " is not divisible by num_heads ", num_heads);
  STRATA_CHECK(options_.dropout >= 0.0 && options_.dropout < 1.0, "MultiheadAttention: dropout must be in [0, 1), got ",
               options_.dropout);
  const int64_t kdim = options_.kdim.value_or(embed_dim), vdim = options_.vdim.value_or(embed_dim);
  STRATA_CHECK(kdim > 0 && vdim > 0, "MultiheadAttention: kdim (", kdim, ") and vdim (", vdim, ") must be positive");
  const InitOptions& init = options_.init;
  auto param = [&](const char* name, const Shape& shape, ParamInit how) {
    InitialValue v = initial_value(shape, how, init);
    return register_parameter(name, v.value, init.by_name ? std::optional(v.recipe) : std::nullopt);
  };
  const int64_t e = embed_dim;
  if (kdim == e && vdim == e) {
    in_proj_weight = param("in_proj_weight", {3 * e, e}, xavier_uniform(3 * e, e));
  } else {
    q_proj_weight = param("q_proj_weight", {e, e}, xavier_uniform(e, e));
    k_proj_weight = param("k_proj_weight", {e, kdim}, xavier_uniform(e, kdim));
    v_proj_weight = param("v_proj_weight", {e, vdim}, xavier_uniform(e, vdim));
  }
  if (options_.bias) in_proj_bias = param("in_proj_bias", {3 * e}, {.kind = ParamInit::Kind::Constant, .scale = 0.0});
  out_proj = register_module("out_proj", std::make_shared<OutProjection>(e, options_.bias, init));
}

namespace {

// Query, key and value projected and split into heads, each [B, H, T, D] (strided views).
struct Heads {
  Tensor q, k, v;
};

Tensor split_heads(const Tensor& x, int64_t heads) {
  return x.view({x.size(0), x.size(1), heads, x.size(2) / heads}).transpose(1, 2);
}

// The three projections; self-attention (one tensor as query, key and value) runs them as one
// GEMM against the packed weight, as torch does.
Heads project(const MultiheadAttention& m, const Tensor& query, const Tensor& key, const Tensor& value) {
  const int64_t e = m.embed_dim(), h = m.num_heads();
  auto bias = [&](int64_t i) { return m.in_proj_bias.defined() ? m.in_proj_bias.narrow(0, i * e, e) : Tensor(); };
  if (m.in_proj_weight.defined() && query.is_same(key) && key.is_same(value)) {
    // [B, L, 3E] -> [B, L, 3, H, D], split (one backward pass assembles the packed gradient).
    const int64_t b = query.size(0), l = query.size(1);
    std::vector<Tensor> parts = split(linear(query, m.in_proj_weight, m.in_proj_bias).view({b, l, 3, h, e / h}), 1, 2);
    auto heads = [](const Tensor& t) { return t.squeeze(2).transpose(1, 2); };
    return {heads(parts[0]), heads(parts[1]), heads(parts[2])};
  }
  auto weight = [&](int64_t i, const Tensor& separate) {
    return m.in_proj_weight.defined() ? m.in_proj_weight.narrow(0, i * e, e) : separate;
  };
  return {split_heads(linear(query, weight(0, m.q_proj_weight), bias(0)), h),
          split_heads(linear(key, weight(1, m.k_proj_weight), bias(1)), h),
          split_heads(linear(value, weight(2, m.v_proj_weight), bias(2)), h)};
}

// softmax(q k^T / sqrt(D) + mask), dropped out, times v: the path that has the weights.
AttentionOutput composed_heads(const Heads& x, const Tensor& mask, double dropout_p, Generator* gen) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(x.q.size(3)));
  Tensor scores = matmul(mul(x.q, scale), x.k.transpose(-1, -2));  // [B, H, L, S]
  if (mask.defined()) scores = add(scores, mask);
  Tensor weights = dropout(softmax(scores, -1), dropout_p, dropout_p > 0.0, gen);
  return {matmul(weights, x.v), weights};
}

}  // namespace

AttentionOutput MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                            const Tensor& key_padding_mask, const Tensor& attn_mask, bool need_weights,
                                            bool average_attn_weights) {
  auto hooks = forward_hooks();
  STRATA_CHECK(query.defined() && key.defined() && value.defined(),
               "MultiheadAttention: query, key and value must be defined");
  const bool batched = query.dim() == 3;
  STRATA_CHECK((query.dim() == 2 || batched) && key.dim() == query.dim() && value.dim() == query.dim(),
               "MultiheadAttention: query, key and value must all be 3-D (batched) or all 2-D (unbatched), got ",
               query.shape(), ", ", key.shape(), ", ", value.shape());
  // Everything below is batch first: [B, T, features].
  auto batch_first = [&](const Tensor& t) {
    if (!batched) return t.unsqueeze(0);
    return options_.batch_first ? t : t.transpose(0, 1);
  };
  const Tensor q_in = batch_first(query), k_in = key.is_same(query) ? q_in : batch_first(key);
  const Tensor v_in = value.is_same(key) ? k_in : batch_first(value);
  const int64_t kdim = options_.kdim.value_or(embed_dim_), vdim = options_.vdim.value_or(embed_dim_);
  STRATA_CHECK(q_in.size(2) == embed_dim_ && k_in.size(2) == kdim && v_in.size(2) == vdim,
               "MultiheadAttention: query, key and value have shapes ", query.shape(), ", ", key.shape(), ", ",
               value.shape(), " but their last dimensions must be embed_dim ", embed_dim_, ", kdim ", kdim,
               " and vdim ", vdim);
  STRATA_CHECK(k_in.size(0) == q_in.size(0) && v_in.size(0) == q_in.size(0) && v_in.size(1) == k_in.size(1),
               "MultiheadAttention: query ", query.shape(), ", key ", key.shape(), " and value ", value.shape(),
               " must share the batch size, and key and value the source length (batch_first = ", options_.batch_first,
               ")");
  const Dims d{q_in.size(0), q_in.size(1), k_in.size(1)};
  const Tensor mask = MaskBuilder(q_in.dtype(), d, num_heads_, batched).combine(key_padding_mask, attn_mask);
  const Heads heads = project(*this, q_in, k_in, v_in);
  const double p = is_training() ? options_.dropout : 0.0;
  AttentionOutput r;
  Tensor y;  // [B, H, L, D]
  if (need_weights || p > 0.0) {
    r = composed_heads(heads, mask, p, options_.dropout_generator);
    y = r.output;
  } else {
    y = attention(heads.q, heads.k, heads.v, {.mask = mask});  // fused per (batch, head)
  }
  Tensor out = out_proj->forward(y.transpose(1, 2).reshape({d.batch, d.target, embed_dim_}));
  out = !batched ? out.squeeze(0) : (options_.batch_first ? out : out.transpose(0, 1));
  Tensor weights;
  if (need_weights) {
    weights = average_attn_weights ? mean(r.weights, {1}) : r.weights;
    if (!batched) weights = weights.squeeze(0);
  }
  return {out, weights};
}

}  // namespace strata::nn
