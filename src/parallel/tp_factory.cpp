#include "strata/parallel/tp_factory.h"

#include "strata/autograd/grad_mode.h"
#include "strata/ops.h"
#include "strata/parallel/tp_layers.h"
#include "strata/parallel/tp_mappings.h"

namespace strata::parallel {

TensorParallelFactory::TensorParallelFactory(dist::ProcessGroup& group, TensorParallelOptions options)
    : group_(group), options_(options), sequence_parallel_now_(options.sequence_parallel) {
  tracker_.add(RngTracker::kTensorParallel, tensor_parallel_seed(options.seed, group.rank()));
}

void TensorParallelFactory::begin_forward(int64_t sequence_length) {
  const bool divides = sequence_length % group_.size() == 0;
  // Training needs the split: its dropout draws per-rank streams that only make sense on
  // pieces. Forwards without grad (evaluation, generation) may run whole instead.
  STRATA_CHECK(!options_.sequence_parallel || divides || !grad_enabled(), "sequence parallelism: the sequence length ",
               sequence_length, " does not divide by the ", group_.size(), " ranks of group ", group_.name(),
               " (forwards without grad run without sequence parallelism; training needs a length that divides)");
  sequence_parallel_now_ = options_.sequence_parallel && divides;
}

int64_t TensorParallelFactory::local_sequence_length(int64_t sequence_length) const {
  const bool split = options_.sequence_parallel && sequence_length % group_.size() == 0;
  return split ? sequence_length / group_.size() : sequence_length;
}

Tensor TensorParallelFactory::enter_region(const Tensor& x) {
  return sequence_parallel_now_ ? gather_from_sequence_region(x, 1, group_) : copy_to_tp_region(x, group_);
}

std::shared_ptr<nn::Linear> TensorParallelFactory::column(int64_t in, int64_t out, bool bias, nn::InitOptions init,
                                                          int64_t sections) {
  return std::make_shared<ColumnParallelLinear>(in, out, bias, init, group_,
                                                ColumnParallelOptions{.sections = sections, .enter_region = false});
}

std::shared_ptr<nn::Linear> TensorParallelFactory::row(int64_t in, int64_t out, bool bias, nn::InitOptions init) {
  return std::make_shared<RowParallelLinear>(in, out, bias, init, group_,
                                             RowParallelOptions{.sequence_parallel = options_.sequence_parallel,
                                                                .sequence_parallel_now = &sequence_parallel_now_});
}

std::shared_ptr<nn::Linear> TensorParallelFactory::row_partial(int64_t in, int64_t out, nn::InitOptions init) {
  return std::make_shared<RowParallelLinear>(in, out, false, init, group_, RowParallelOptions{.reduce_output = false});
}

Tensor TensorParallelFactory::reduce_partial(const Tensor& x) {
  return sequence_parallel_now_ ? reduce_scatter_to_sequence_region(x, 1, group_) : reduce_from_tp_region(x, group_);
}

std::shared_ptr<nn::Embedding> TensorParallelFactory::embedding(int64_t vocab, int64_t dim, nn::InitOptions init) {
  return std::make_shared<VocabParallelEmbedding>(vocab, dim, init, group_, options_.sequence_parallel,
                                                  &sequence_parallel_now_);
}

std::shared_ptr<nn::Linear> TensorParallelFactory::head(int64_t in, int64_t vocab, nn::InitOptions init) {
  return std::make_shared<ColumnParallelLinear>(in, vocab, false, init, group_,
                                                ColumnParallelOptions{.pad = true, .enter_region = false});
}

int64_t TensorParallelFactory::vocab_start(int64_t vocab) const {
  return ShardLayout{.dim = 0, .full_size = vocab, .pad = true}.part_size(group_.size()) * group_.rank();
}

Tensor TensorParallelFactory::cross_entropy(const Tensor& logits, const Tensor& targets, int64_t vocab,
                                            int64_t classes) {
  // The parts split the padded vocabulary; columns past `classes` are padding on every rank.
  return vocab_parallel_cross_entropy(logits, targets, vocab_start(vocab), classes, group_);
}

Tensor TensorParallelFactory::gather_logits(const Tensor& logits, int64_t classes) {
  Tensor all = gather_from_tp_region(logits, -1, group_);  // [.., padded vocabulary]
  return all.size(-1) == classes ? all : all.narrow(-1, 0, classes);
}

Tensor TensorParallelFactory::sequence_piece(const Tensor& x) {
  if (!sequence_parallel_now_ || group_.size() == 1) return x;
  const int64_t T = x.size(1), n = group_.size();
  STRATA_CHECK(T % n == 0, "sequence parallelism: the sequence length ", T, " does not divide by the ", n,
               " ranks of group ", group_.name());
  return x.narrow(1, T / n * group_.rank(), T / n);
}

void TensorParallelFactory::model_built(nn::Module& model) {
  if (!options_.sequence_parallel || group_.size() == 1) return;
  for (Tensor& p : replicated_parameters(model)) {
    dist::ProcessGroup* g = &group_;
    p.register_hook([g](const Tensor& grad) { return all_reduce_copy(grad, *g); });
  }
}

}  // namespace strata::parallel
