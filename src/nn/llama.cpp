#include "strata/nn/llama.h"

#include <tuple>
#include <utility>

#include "strata/ops.h"
#include "strata/tensor/factory.h"

namespace strata::nn {
namespace {
// Every Linear and the embedding: normal(0, init_std), drawn by name.
InitOptions llama_init(const LlamaConfig& config) {
  return {
      .std = config.init_std, .dtype = config.parameter_dtype(), .linear_init = LinearInit::Normal, .by_name = true};
}
}  // namespace

void check_llama_config(const LlamaConfig& c, int64_t tp) {
  STRATA_CHECK(c.vocab_size > 0 && c.context > 0 && c.n_layer > 0 && c.n_head > 0 && c.n_kv_head > 0 && c.n_embd > 0 &&
                   c.intermediate_size > 0,
               "Llama: every size in the config must be positive (vocab_size ", c.vocab_size, ", context ", c.context,
               ", n_layer ", c.n_layer, ", n_head ", c.n_head, ", n_kv_head ", c.n_kv_head, ", n_embd ", c.n_embd,
               ", intermediate_size ", c.intermediate_size, ")");
  STRATA_CHECK(c.n_embd % c.n_head == 0, "Llama: n_embd ", c.n_embd, " is not divisible by n_head ", c.n_head);
  STRATA_CHECK(c.head_dim() % 2 == 0, "Llama: head_dim ", c.head_dim(), " (n_embd / n_head) must be even for rotary");
  STRATA_CHECK(c.n_head % c.n_kv_head == 0, "Llama: n_head ", c.n_head, " is not divisible by n_kv_head ", c.n_kv_head);
  STRATA_CHECK(c.rope_theta > 0.0 && c.rms_norm_eps > 0.0 && c.init_std > 0.0,
               "Llama: rope_theta, rms_norm_eps and init_std must be positive (got ", c.rope_theta, ", ",
               c.rms_norm_eps, ", ", c.init_std, ")");
  STRATA_CHECK(tp >= 1 && c.n_head % tp == 0 && c.n_kv_head % tp == 0 && c.intermediate_size % tp == 0,
               "Llama: the tensor-parallel degree ", tp, " must divide n_head ", c.n_head, ", n_kv_head ", c.n_kv_head,
               " and intermediate_size ", c.intermediate_size);
  check_model_dtypes("Llama", c.dtype, c.parameter_dtype());
  (void)vocab_rows("Llama", c.vocab_size, c.padded_vocab_size);
}

LlamaAttention::LlamaAttention(const LlamaConfig& config, int64_t layer, LayerFactory& f)
    : n_head(config.n_head / f.degree()),
      n_kv_head(config.n_kv_head / f.degree()),
      head_dim(config.head_dim()),
      layer_index(layer),
      factory(f) {
  const int64_t C = config.n_embd, D = head_dim;
  q_proj = register_module("q_proj", f.column(C, config.n_head * D, false, llama_init(config)));
  k_proj = register_module("k_proj", f.column(C, config.n_kv_head * D, false, llama_init(config)));
  v_proj = register_module("v_proj", f.column(C, config.n_kv_head * D, false, llama_init(config)));
  o_proj = register_module("o_proj", f.row(config.n_head * D, C, false, llama_init(config)));
}

Tensor LlamaAttention::forward(const Tensor& x, const Tensor& cos, const Tensor& sin, KVCache* cache,
                               ContextSplit* context) {
  Tensor in = factory.enter_region(x);  // the whole sequence, even with sequence parallelism
  const int64_t B = in.size(0), T = in.size(1);
  // [B, T, heads * D] -> [B, heads, T, D] views; rotary writes q and k contiguous.
  auto heads = [&](const Tensor& t, int64_t n) { return t.view({B, T, n, head_dim}).transpose(1, 2); };
  Tensor q = rotary_embedding(heads(q_proj->forward(in), n_head), cos, sin);
  Tensor k = rotary_embedding(heads(k_proj->forward(in), n_kv_head), cos, sin);
  Tensor v = heads(v_proj->forward(in), n_kv_head);
  if (cache != nullptr) std::tie(k, v) = cache->append(layer_index, k, v);
  // [B, H, T, D], memory [B, T, H, D] (contiguous with a context split)
  Tensor y = context != nullptr ? context->causal_attention(q, k, v) : attention(q, k, v, {.causal = true});
  return o_proj->forward(y.transpose(1, 2).reshape({B, T, n_head * head_dim}));
}

LlamaMLP::LlamaMLP(const LlamaConfig& config, LayerFactory& f) : factory(f) {
  const int64_t C = config.n_embd, I = config.intermediate_size;
  gate_proj = register_module("gate_proj", f.column(C, I, false, llama_init(config)));
  up_proj = register_module("up_proj", f.column(C, I, false, llama_init(config)));
  down_proj = register_module("down_proj", f.row(I, C, false, llama_init(config)));
}

Tensor LlamaMLP::forward(const Tensor& x) {
  Tensor in = factory.enter_region(x);  // once for both column projections
  return down_proj->forward(mul(silu(gate_proj->forward(in)), up_proj->forward(in)));
}

LlamaDecoderLayer::LlamaDecoderLayer(const LlamaConfig& config, int64_t layer_index, LayerFactory& factory) {
  const DType pd = config.parameter_dtype();
  input_layernorm =
      register_module("input_layernorm", std::make_shared<RMSNorm>(config.n_embd, config.rms_norm_eps, pd));
  self_attn = register_module("self_attn", std::make_shared<LlamaAttention>(config, layer_index, factory));
  post_attention_layernorm =
      register_module("post_attention_layernorm", std::make_shared<RMSNorm>(config.n_embd, config.rms_norm_eps, pd));
  mlp = register_module("mlp", std::make_shared<LlamaMLP>(config, factory));
}

Tensor LlamaDecoderLayer::forward_block(const Tensor& x, const BlockInputs& in) {
  Tensor h = add(x, self_attn->forward(input_layernorm->forward(x), in.cos, in.sin, in.cache, in.context));
  return add(h, mlp->forward(post_attention_layernorm->forward(h)));
}

ParameterCounts parameter_counts(const LlamaConfig& c) {
  const int64_t C = c.n_embd, D = c.head_dim();
  const int64_t attention = C * c.n_head * D + 2 * C * c.n_kv_head * D + c.n_head * D * C;
  const int64_t V = vocab_rows("Llama", c.vocab_size, c.padded_vocab_size);
  return {.embedding = V * C, .block = 2 * C + attention + 3 * C * c.intermediate_size, .head = C + V * C};
}

namespace {
CausalLM::Pieces llama_pieces(const LlamaConfig& config, const ModelPart& part, LayerFactory& f,
                              const Llama::BlockBuilder& block) {
  check_llama_config(config, f.degree());
  const DType pd = config.parameter_dtype();
  CausalLM::Pieces p{.before = {}, .blocks_name = "layers", .blocks = {}, .after = {}, .vocab_tables = {}};
  const int64_t rows = vocab_rows("Llama", config.vocab_size, config.padded_vocab_size);
  auto embed_tokens = part.embedding ? f.embedding(rows, config.n_embd, llama_init(config)) : nullptr;
  if (embed_tokens != nullptr) p.vocab_tables.push_back(embed_tokens->weight);
  p.before.emplace_back("embed_tokens", embed_tokens);
  for (int64_t i : *part.blocks) p.blocks.emplace_back(i, block(i, f));
  if (part.head) {
    p.after.emplace_back("norm", std::make_shared<RMSNorm>(config.n_embd, config.rms_norm_eps, pd));
    auto lm_head = f.head(config.n_embd, rows, llama_init(config));
    p.vocab_tables.push_back(lm_head->weight);
    p.after.emplace_back("lm_head", lm_head);
  }
  return p;
}
}  // namespace

Llama::Llama(const LlamaConfig& config, std::shared_ptr<LayerFactory> factory, ModelPart part)
    : Llama(config, std::move(factory), std::move(part), [&config](int64_t index, LayerFactory& f) {
        return std::make_shared<LlamaDecoderLayer>(config, index, f);
      }) {}

Llama::Llama(const LlamaConfig& config, std::shared_ptr<LayerFactory> factory, ModelPart part,
             const BlockBuilder& block)
    : CausalLM(std::move(factory), std::move(part),
               {.vocab_size = config.vocab_size,
                .padded_vocab = config.padded_vocab_size,
                .context = config.context,
                .num_layers = config.n_layer,
                .hidden_size = config.n_embd,
                .dtype = config.dtype},
               config.seed,
               [&config, &block](const ModelPart& p, LayerFactory& f) { return llama_pieces(config, p, f, block); }),
      config_(config) {
  embed_tokens = piece<Embedding>("embed_tokens");
  layers = piece<BlockList>("layers");
  norm = piece<RMSNorm>("norm");
  lm_head = piece<Linear>("lm_head");
}

Tensor Llama::embed(const Tensor& tokens, Positions) {
  STRATA_CHECK(part_.embedding, "Llama: this part of the model does not hold the embedding");
  return embed_tokens->forward(tokens);
}

const RotaryTables& Llama::rotary_for(Positions p, Device device) {
  if (p.offset != rope_positions_.offset || p.length != rope_positions_.length || !rope_.cos.defined() ||
      rope_.cos.device() != device) {
    rope_ = rotary_tables(p.length, config_.head_dim(), config_.rope_theta, p.offset, config_.dtype);
    if (!device.is_cpu()) rope_ = {rope_.cos.to(device), rope_.sin.to(device)};
    rope_positions_ = p;
  }
  return rope_;
}

BlockInputs Llama::block_inputs(Positions positions, Device device, KVCache* cache) {
  const RotaryTables& rope = rotary_for(positions, device);
  if (context_) return {.cos = context_->local(rope.cos, 0), .sin = context_->local(rope.sin, 0), .cache = cache};
  return {.cos = rope.cos, .sin = rope.sin, .cache = cache};
}

Tensor Llama::head(const Tensor& hidden) {
  STRATA_CHECK(part_.head, "Llama: this part of the model does not hold the head");
  return lm_head->forward(factory_->enter_region(norm->forward(hidden)));
}

double Llama::flops_per_step(int64_t batch, int64_t seq_len) const {
  const double tokens = static_cast<double>(batch * seq_len);
  const double matmul_params =
      static_cast<double>(num_parameters() - (embed_tokens ? embed_tokens->weight.numel() : 0));
  const double attention = 12.0 * static_cast<double>(config_.n_layer) * static_cast<double>(batch) *
                           static_cast<double>(seq_len * seq_len) * static_cast<double>(config_.n_embd);
  return 6.0 * matmul_params * tokens + attention;
}

}  // namespace strata::nn
