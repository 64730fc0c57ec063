#include "strata/nn/gpt.h"

#include <cmath>

#include "strata/ops.h"
#include "strata/tensor/factory.h"

namespace strata::nn {
namespace {
// GPT-2's Linear initialisation: normal(0, std) weights and zero biases, drawn by name.
InitOptions gpt2_init(double std, const GPTConfig& config) {
  return {.std = std, .dtype = config.parameter_dtype(), .linear_init = LinearInit::Normal, .by_name = true};
}
// GPT's dropouts act outside the tensor-parallel regions, on activations every rank holds
// whole (the default generator, alike on every rank), unless sequence parallelism gives each
// rank its own piece of the sequence (then a per-rank stream).
Generator* dropout_generator(LayerFactory& f) { return f.sequence_parallel() ? f.sharded_generator() : nullptr; }
}  // namespace

CausalSelfAttention::CausalSelfAttention(const GPTConfig& config, int64_t layer, LayerFactory& f)
    : n_head(config.n_head / f.degree()), layer_index(layer), factory(f) {
  // GPT-2 scales the init of projections into the residual stream by 1/sqrt(2 n_layer).
  const double proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config.n_layer));
  c_attn = register_module("c_attn", f.column(config.n_embd, 3 * config.n_embd, true, gpt2_init(0.02, config),
                                              /*sections=*/3));
  c_proj = register_module("c_proj", f.row(config.n_embd, config.n_embd, true, gpt2_init(proj_std, config)));
  resid_dropout = register_module("resid_dropout", std::make_shared<Dropout>(config.dropout, dropout_generator(f)));
}

Tensor CausalSelfAttention::forward(const Tensor& x, KVCache* cache, ContextSplit* context) {
  Tensor in = factory.enter_region(x);  // the whole sequence, even with sequence parallelism
  const int64_t B = in.size(0), T = in.size(1);
  const int64_t D = in.size(2) / (n_head * factory.degree());
  const int64_t C = n_head * D;  // this rank's width
  // [B, T, 3C] -> q, k, v as strided [B, H, T, D] views that attention reads in place.
  // split (not three selects) so that backward assembles the qkv gradient in one pass.
  std::vector<Tensor> qkv = split(c_attn->forward(in).view({B, T, 3, n_head, D}), 1, 2);
  auto heads = [](const Tensor& t) { return t.squeeze(2).transpose(1, 2); };
  Tensor y;  // [B, H, T, D]
  if (cache != nullptr) {
    auto [k, v] = cache->append(layer_index, heads(qkv[1]), heads(qkv[2]));
    y = attention(heads(qkv[0]), k, v, {.causal = true});  // causal aligned to the end
  } else if (context != nullptr) {
    y = context->causal_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]));
  } else {
    y = causal_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]));
  }
  // Attention writes its output in [B, T, H, D] memory order: merging heads is a view.
  y = y.transpose(1, 2).reshape({B, T, C});
  return resid_dropout->forward(c_proj->forward(y));
}

MLP::MLP(const GPTConfig& config, LayerFactory& f) : factory(f) {
  const double proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config.n_layer));
  c_fc = register_module("c_fc", f.column(config.n_embd, 4 * config.n_embd, true, gpt2_init(0.02, config)));
  c_proj = register_module("c_proj", f.row(4 * config.n_embd, config.n_embd, true, gpt2_init(proj_std, config)));
  dropout = register_module("dropout", std::make_shared<Dropout>(config.dropout, dropout_generator(f)));
}

Tensor MLP::forward(const Tensor& x) {
  return dropout->forward(c_proj->forward(gelu(c_fc->forward(factory.enter_region(x)))));
}

Block::Block(const GPTConfig& config, int64_t layer_index, LayerFactory& factory) {
  ln_1 = register_module("ln_1", std::make_shared<LayerNorm>(config.n_embd, 1e-5, config.parameter_dtype()));
  attn = register_module("attn", std::make_shared<CausalSelfAttention>(config, layer_index, factory));
  ln_2 = register_module("ln_2", std::make_shared<LayerNorm>(config.n_embd, 1e-5, config.parameter_dtype()));
  mlp = register_module("mlp", std::make_shared<MLP>(config, factory));
}

Tensor Block::forward_block(const Tensor& x, const BlockInputs& in) {
  Tensor h = add(x, attn->forward(ln_1->forward(x), in.cache, in.context));
  return add(h, mlp->forward(ln_2->forward(h)));
}

ParameterCounts parameter_counts(const GPTConfig& c) {
  const int64_t C = c.n_embd;
  const int64_t V = vocab_rows("GPT", c.vocab_size, c.padded_vocab_size);
  return {.embedding = (V + c.context) * C,
          .block = 2 * 2 * C + (3 * C * C + 3 * C) + (C * C + C) + (4 * C * C + 4 * C) + (4 * C * C + C),
          .head = 2 * C + V * C};
}

namespace {
void check_gpt_config(const GPTConfig& config, int64_t tp) {
  STRATA_CHECK(
      config.vocab_size > 0 && config.context > 0 && config.n_layer > 0 && config.n_head > 0 && config.n_embd > 0,
      "GPT: every size in the config must be positive (vocab ", config.vocab_size, ", context ", config.context,
      ", layers ", config.n_layer, ", heads ", config.n_head, ", width ", config.n_embd, ")");
  check_model_dtypes("GPT", config.dtype, config.parameter_dtype());
  (void)vocab_rows("GPT", config.vocab_size, config.padded_vocab_size);
  STRATA_CHECK(config.n_embd % config.n_head == 0, "GPT: n_embd ", config.n_embd, " is not divisible by n_head ",
               config.n_head);
  STRATA_CHECK(config.n_head % tp == 0, "GPT: the tensor-parallel degree ", tp, " does not divide n_head ",
               config.n_head);
}

CausalLM::Pieces gpt_pieces(const GPTConfig& config, const ModelPart& part, LayerFactory& f) {
  check_gpt_config(config, f.degree());
  const DType pd = config.parameter_dtype();
  const InitOptions init{.dtype = pd, .by_name = true};
  CausalLM::Pieces p{.before = {}, .blocks_name = "h", .blocks = {}, .after = {}, .vocab_tables = {}};
  const bool embedding = part.embedding;
  const int64_t rows = vocab_rows("GPT", config.vocab_size, config.padded_vocab_size);
  auto wte = embedding || part.head ? f.embedding(rows, config.n_embd, init) : nullptr;
  if (wte != nullptr) p.vocab_tables.push_back(wte->weight);
  p.before.emplace_back("wte", wte);
  p.before.emplace_back("wpe", embedding ? std::make_shared<Embedding>(config.context, config.n_embd, init) : nullptr);
  p.before.emplace_back("drop", embedding ? std::make_shared<Dropout>(config.dropout, dropout_generator(f)) : nullptr);
  for (int64_t i : *part.blocks) p.blocks.emplace_back(i, std::make_shared<Block>(config, i, f));
  p.after.emplace_back("ln_f", part.head ? std::make_shared<LayerNorm>(config.n_embd, 1e-5, pd) : nullptr);
  return p;
}
}  // namespace

GPT::GPT(const GPTConfig& config, std::shared_ptr<LayerFactory> factory, ModelPart part)
    : CausalLM(std::move(factory), std::move(part),
               {.vocab_size = config.vocab_size,
                .padded_vocab = config.padded_vocab_size,
                .context = config.context,
                .num_layers = config.n_layer,
                .hidden_size = config.n_embd,
                .dtype = config.dtype},
               config.seed, [&config](const ModelPart& p, LayerFactory& f) { return gpt_pieces(config, p, f); }),
      config_(config) {
  wte = piece<Embedding>("wte");
  wpe = piece<Embedding>("wpe");
  drop = piece<Dropout>("drop");
  h = piece<BlockList>("h");
  ln_f = piece<LayerNorm>("ln_f");
}

Tensor GPT::embed(const Tensor& tokens, Positions p) {
  STRATA_CHECK(part_.embedding, "GPT: this part of the model does not hold the embedding");
  // With sequence parallelism the token embedding returns this rank's piece of the sequence.
  Tensor positions =
      wpe->forward(arange(p.offset, p.offset + p.length, 1, {.dtype = DType::Int64, .device = tokens.device()}))
          .unsqueeze(0);
  if (context_) positions = context_->local(positions, 1);  // this rank's positions
  positions = factory_->sequence_piece(positions);
  return drop->forward(add(wte->forward(tokens), positions));
}

Tensor GPT::head(const Tensor& hidden) {
  STRATA_CHECK(part_.head, "GPT: this part of the model does not hold the head");
  // Tied head (a 16-bit wte: float32 compute, no float32 copy kept); with tensor
  // parallelism, this rank's rows of wte give its part of the vocabulary.
  return linear(factory_->enter_region(ln_f->forward(hidden)), wte->weight);
}

std::vector<Generator*> GPT::block_generators() { return {dropout_generator(*factory_)}; }

double GPT::flops_per_step(int64_t batch, int64_t seq_len) const {
  const double tokens = static_cast<double>(batch * seq_len);
  const double params = static_cast<double>(num_parameters());
  const double attention = 12.0 * static_cast<double>(config_.n_layer) * static_cast<double>(batch) *
                           static_cast<double>(seq_len * seq_len) * static_cast<double>(config_.n_embd);
  return 6.0 * params * tokens + attention;
}

}  // namespace strata::nn
