#include "strata/nn/causal_lm.h"

#include <algorithm>
#include <utility>

#include "strata/autograd/checkpoint.h"
#include "strata/autograd/grad_mode.h"
#include "strata/ops.h"

namespace strata::nn {

Tensor TransformerBlock::operator()(const Tensor& x, const BlockInputs& inputs) {
  auto hooks = forward_hooks();
  return hooks.output(forward_block(x, inputs));
}

void BlockList::add(int64_t index, std::shared_ptr<TransformerBlock> block) {
  const auto i = static_cast<size_t>(index);
  STRATA_CHECK(index >= 0 && block != nullptr, "BlockList: block ", index, " is null or has a negative index");
  if (blocks_.size() <= i) blocks_.resize(i + 1);
  STRATA_CHECK(blocks_[i] == nullptr, "BlockList: block ", index, " added twice");
  register_module(std::to_string(index), block);
  blocks_[i] = std::move(block);
  ++count_;
}

TransformerBlock& BlockList::operator[](size_t index) {
  STRATA_CHECK(index < blocks_.size() && blocks_[index] != nullptr, "BlockList: block ", index, " is not held here");
  return *blocks_[index];
}

int64_t pad_vocab_size(int64_t vocab_size, int64_t multiple) {
  STRATA_CHECK(vocab_size > 0 && multiple >= 1, "pad_vocab_size: vocab_size ", vocab_size, " and multiple ", multiple,
               " must be positive");
  return (vocab_size + multiple - 1) / multiple * multiple;
}

int64_t vocab_rows(const char* family, int64_t vocab_size, int64_t padded_vocab_size) {
  STRATA_CHECK(padded_vocab_size == 0 || padded_vocab_size >= vocab_size, family, ": padded_vocab_size ",
               padded_vocab_size, " is smaller than vocab_size ", vocab_size,
               " (0 means no padding; otherwise it must be >= vocab_size)");
  return padded_vocab_size == 0 ? vocab_size : padded_vocab_size;
}

void check_model_dtypes(const char* family, DType dtype, DType pd) {
  STRATA_CHECK(dtype == DType::Float32 || dtype == DType::Float64, family, ": dtype ", dtype,
               " cannot be computed in; use float32 or float64 (and param_dtype for 16-bit parameters)");
  STRATA_CHECK(pd == dtype || ((pd == DType::BFloat16 || pd == DType::Float16) && dtype == DType::Float32), family,
               ": param_dtype ", pd, " with dtype ", dtype,
               " is not supported; parameters are stored in dtype, or in bfloat16/float16 with dtype float32");
}

CausalLM::CausalLM(std::shared_ptr<LayerFactory> factory, ModelPart part, Sizes sizes, uint64_t seed,
                   const PieceBuilder& build)
    : factory_(factory != nullptr ? std::move(factory) : default_layer_factory()),
      part_(std::move(part)),
      sizes_(sizes) {
  resolve_part(sizes.num_layers);
  Pieces pieces = build(part_, *factory_);
  for (auto& [name, m] : pieces.before)
    if (m != nullptr) register_module(name, m);
  blocks_ = register_module(pieces.blocks_name, std::make_shared<BlockList>());
  for (auto& [index, block] : pieces.blocks) blocks_->add(index, block);
  for (auto& [name, m] : pieces.after)
    if (m != nullptr) register_module(name, m);
  init_parameters(seed);
  zero_vocab_padding(pieces.vocab_tables);
  factory_->model_built(*this);
}

void CausalLM::zero_vocab_padding(const std::vector<Tensor>& tables) {
  if (padded_vocab_size() == vocab_size()) return;
  // This rank's rows are global rows [start, start + rows); those >= vocab_size are padding.
  const int64_t start = factory_->vocab_start(padded_vocab_size());
  for (const Tensor& t : tables) {
    const int64_t first = std::clamp<int64_t>(vocab_size() - start, 0, t.size(0));
    if (first < t.size(0)) {
      NoGradGuard no_grad;
      t.narrow(0, first, t.size(0) - first).zero_();
    }
  }
}

void CausalLM::resolve_part(int64_t num_layers) {
  if (!part_.blocks) {
    part_.blocks.emplace();
    for (int64_t i = 0; i < num_layers; ++i) part_.blocks->push_back(i);
  }
  const std::vector<int64_t>& blocks = *part_.blocks;
  for (size_t k = 0; k < blocks.size(); ++k) {
    STRATA_CHECK(blocks[k] >= 0 && blocks[k] < num_layers, "ModelPart: block ", blocks[k],
                 " does not exist (the model has ", num_layers, " blocks)");
    STRATA_CHECK(k == 0 || blocks[k - 1] < blocks[k], "ModelPart: blocks must be listed once each, ascending; got ",
                 blocks[k - 1], " before ", blocks[k]);
  }
}

bool CausalLM::is_whole() const {
  return part_.embedding && part_.head && static_cast<int64_t>(part_.blocks->size()) == num_layers();
}

bool CausalLM::has_block(int64_t index) const {
  return std::binary_search(part_.blocks->begin(), part_.blocks->end(), index);
}

Tensor CausalLM::run_block(int64_t index, const Tensor& hidden, Positions positions, KVCache* cache) {
  BlockInputs inputs = block_inputs(positions, hidden.device(), cache);
  inputs.context = context_.get();
  return (*blocks_)[static_cast<size_t>(index)](hidden, inputs);
}

Tensor CausalLM::forward_logits(const Tensor& tokens, KVCache* cache) {
  return factory_->gather_logits(local_logits(tokens, cache), vocab_size());  // the real words only
}

Tensor CausalLM::loss(const Tensor& tokens, const Tensor& targets) {
  STRATA_CHECK(targets.shape() == tokens.shape(), "loss: targets shape ", targets.shape(),
               " differs from tokens shape ", tokens.shape());
  Tensor logits = local_logits(tokens, nullptr);
  const int64_t N = tokens.numel();
  Tensor loss = factory_->cross_entropy(logits.reshape({N, logits.size(-1)}), targets.reshape({N}), padded_vocab_size(),
                                        vocab_size());
  // With a context split: the mean over every rank's targets, not the mean of the ranks'
  // means (their counts of ignored targets differ).
  if (context_) loss = context_->global_mean(loss, sum(ne(targets, -100.0).to(loss.dtype())));
  return aux_loss_.defined() ? add(loss, aux_loss_.to(loss.dtype())) : loss;
}

void CausalLM::add_auxiliary_loss(const Tensor& term) {
  if (term.defined()) aux_loss_ = aux_loss_.defined() ? add(aux_loss_, term) : term;
}

Tensor CausalLM::run_blocks(std::span<const int64_t> indices, Tensor x, Positions positions, KVCache* cache) {
  const bool recompute = recompute_ && cache == nullptr && grad_enabled();
  for (int64_t i : indices) {
    STRATA_CHECK(has_block(i), family(), ": block ", i, " is not in this part of the model");
    if (recompute) {
      // The block's auxiliary loss is a second output, so that backward reaches it through
      // the recomputation too.
      auto block = [this, i, positions](const std::vector<Tensor>& in) {
        factory_->begin_forward(positions.length / context_degree());  // the same split when backward runs it again
        std::vector<Tensor> out{run_block(i, in[0], positions)};
        Tensor aux = (*blocks_)[static_cast<size_t>(i)].auxiliary_loss();
        if (aux.defined()) out.push_back(aux);
        return out;
      };
      std::vector<Tensor> out = autograd::checkpoint(block, {x}, block_generators());
      x = out[0];
      if (out.size() > 1) add_auxiliary_loss(out[1]);
    } else {
      x = run_block(i, x, positions, cache);
      add_auxiliary_loss((*blocks_)[static_cast<size_t>(i)].auxiliary_loss());
    }
  }
  return x;
}

Tensor CausalLM::local_logits(const Tensor& tokens, KVCache* cache) {
  STRATA_CHECK(is_whole(), family(),
               ": this model holds part of the layers (a pipeline stage); run it through "
               "parallel::Pipeline");
  auto hooks = forward_hooks();
  const int64_t offset = check_tokens(tokens, cache);
  const Positions positions{offset, tokens.size(1) * context_degree()};
  factory_->begin_forward(tokens.size(1));
  aux_loss_ = Tensor();
  Tensor x = run_blocks(*part_.blocks, embed(tokens, positions), positions, cache);
  if (cache != nullptr) cache->advance(positions.length);
  return hooks.output(head(x));
}

int64_t CausalLM::check_tokens(const Tensor& tokens, const KVCache* cache) const {
  const char* model = family();
  STRATA_CHECK(tokens.dim() == 2, model, ": tokens must be [batch, time], got shape ", tokens.shape());
  STRATA_CHECK(tokens.dtype() == DType::Int64, model, ": tokens must be int64, got ", tokens.dtype());
  const int64_t offset = cache != nullptr ? cache->length() : 0;
  STRATA_CHECK(cache == nullptr || context_degree() == 1, model,
               ": generation with a KV cache runs without context parallelism (set_context_split(nullptr))");
  const int64_t T = tokens.size(1) * context_degree();
  STRATA_CHECK(T > 0, model, ": tokens of shape ", tokens.shape(), " hold no positions");
  STRATA_CHECK(offset + T <= context_length(), model, ": sequence length ", offset + T,
               cache != nullptr ? " (cached + new)" : "", " exceeds the context of ", context_length());
  STRATA_CHECK(cache == nullptr || cache->num_layers() == num_layers(), model, ": the cache has ",
               cache == nullptr ? 0 : cache->num_layers(), " layers, the model ", num_layers());
  return offset;
}

}  // namespace strata::nn
