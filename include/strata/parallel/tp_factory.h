#pragma once
// The layer factory that makes nn::GPT and nn::Llama tensor-parallel (Megatron-style) over
// a tensor-parallel group, optionally with sequence parallelism:
//
//   auto tp = std::make_shared<parallel::TensorParallelFactory>(mesh.group(dist::MeshDim::Tensor));
//   nn::GPT model(config, tp);
//
// Each block then needs one all-reduce after attention and one after the MLP in forward, and
// one each in backward (with sequence parallelism: an all-gather before and a
// reduce-scatter after each, both ways). The model built with the same seed is the
// single-process model cut into parts; load_full_state_dict / full_state_dict (tp_layers.h)
// move single-process weights in and out.
//
// Sequence parallelism: norms, residuals, dropout and GPT's position embeddings work on this
// rank's piece of the sequence, in every forward whose sequence length divides by the degree
// (others, such as generation's one-token steps, run without it), so
// replicated parameters (norm weights, row-parallel biases, position embeddings) receive the
// gradient of this rank's tokens only. The factory hooks each of them (model_built) to
// all-reduce its incoming gradient over the group before it is accumulated, so .grad() is
// the full gradient, with or without gradient accumulation, before DDP or ZeRO see it.
#include <cstdint>
#include <memory>

#include "strata/distributed/process_group.h"
#include "strata/nn/layer_factory.h"
#include "strata/parallel/rng_tracker.h"

namespace strata::parallel {

struct TensorParallelOptions {
  bool sequence_parallel = false;
  // Seed of the per-rank stream (rng_tracker().get(RngTracker::kTensorParallel)), mixed
  // with the TP rank; the same value on every rank.
  uint64_t seed = 1234;
};

class TensorParallelFactory : public nn::LayerFactory {
 public:
  // `group` must outlive every model built with this factory.
  explicit TensorParallelFactory(dist::ProcessGroup& group, TensorParallelOptions options = {});

  int64_t degree() const override { return group_.size(); }
  bool sequence_parallel() const override { return options_.sequence_parallel; }
  dist::ProcessGroup& group() const { return group_; }

  Tensor enter_region(const Tensor& x) override;
  std::shared_ptr<nn::Linear> column(int64_t in, int64_t out, bool bias, nn::InitOptions init,
                                     int64_t sections = 1) override;
  std::shared_ptr<nn::Linear> row(int64_t in, int64_t out, bool bias, nn::InitOptions init) override;
  std::shared_ptr<nn::Linear> row_partial(int64_t in, int64_t out, nn::InitOptions init) override;
  Tensor reduce_partial(const Tensor& x) override;
  bool sequence_parallel_now() const override { return sequence_parallel_now_; }
  std::shared_ptr<nn::Embedding> embedding(int64_t vocab, int64_t dim, nn::InitOptions init) override;
  std::shared_ptr<nn::Linear> head(int64_t in, int64_t vocab, nn::InitOptions init) override;
  int64_t vocab_start(int64_t vocab) const override;
  Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t vocab, int64_t classes) override;
  Tensor gather_logits(const Tensor& logits, int64_t classes) override;
  Tensor sequence_piece(const Tensor& x) override;
  Generator* sharded_generator() override { return &tracker_.get(RngTracker::kTensorParallel); }
  void begin_forward(int64_t sequence_length) override;
  int64_t local_sequence_length(int64_t sequence_length) const override;
  void model_built(nn::Module& model) override;
  // The named streams (save states() with a checkpoint to resume dropout exactly).
  RngTracker& rng_tracker() { return tracker_; }

 private:
  dist::ProcessGroup& group_;
  TensorParallelOptions options_;
  // Sequence parallelism in the current forward: options_.sequence_parallel and a sequence
  // that divides. The split layers read it through a pointer at every forward.
  bool sequence_parallel_now_ = false;
  RngTracker tracker_;
};

}  // namespace strata::parallel
