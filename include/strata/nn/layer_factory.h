#pragma once
// How a model makes the layers that tensor parallelism splits, so that nn never includes
// parallel/: the default factory makes the plain single-process layers, and
// parallel::TensorParallelFactory (strata/parallel/tp_factory.h) makes the split ones.
//
// A model written against it marks where a tensor-parallel region begins (enter_region, once
// before the column projections that read the same input), builds its projections with
// column() and row(), its token embedding with embedding() and its output head with head(),
// and computes its loss and full logits through cross_entropy() and gather_logits(). In
// one process each of these is the plain op.
#include <cstdint>
#include <memory>

#include "strata/nn/layers.h"

namespace strata::nn {

class LayerFactory {
 public:
  virtual ~LayerFactory() = default;

  // The tensor-parallel degree: the number of parts each split layer has (1: none).
  virtual int64_t degree() const { return 1; }
  // Activations outside the tensor-parallel regions are split along the sequence (dim 1).
  virtual bool sequence_parallel() const { return false; }
  // Called by a model before each forward (and before a recomputed block) with its sequence
  // length: the tensor-parallel factory uses sequence parallelism for this forward only where
  // the length divides by the degree (generation's single tokens run without it).
  virtual void begin_forward(int64_t /*sequence_length*/) {}
  // The sequence length of the hidden states between blocks in a forward of `sequence_length`
  // positions (after begin_forward): this rank's piece with sequence parallelism.
  virtual int64_t local_sequence_length(int64_t sequence_length) const { return sequence_length; }

  // Enters a region in which each rank computes its part of the features from the same x:
  // identity here (tensor parallel: identity whose backward all-reduces; sequence parallel:
  // all-gathers the sequence).
  virtual Tensor enter_region(const Tensor& x) { return x; }
  // x W^T + b with the output features split: [.., in] -> [.., out / degree]. `sections`
  // independent blocks of the output (3 for a fused q, k, v) are each split.
  virtual std::shared_ptr<Linear> column(int64_t in, int64_t out, bool bias, InitOptions init, int64_t sections = 1);
  // x W^T + b with the input features split: [.., in / degree] -> [.., out], the parts
  // summed (all-reduce, or reduce-scatter along the sequence) before b is added.
  virtual std::shared_ptr<Linear> row(int64_t in, int64_t out, bool bias, InitOptions init);
  // As row() without bias and without the sum: [.., in / degree] -> [.., out] holds this
  // rank's partial sums, which reduce_partial() adds up later - once for the rows of several
  // such layers (a mixture of experts sums all its experts' outputs in one collective, so
  // that which experts ran never changes the collectives a rank calls).
  virtual std::shared_ptr<Linear> row_partial(int64_t in, int64_t out, InitOptions init);
  // Sums row_partial() outputs over the ranks: x here. An all-reduce (backward: identity),
  // or where sequence_parallel_now(), a reduce-scatter along dim 1 (backward: all-gather).
  virtual Tensor reduce_partial(const Tensor& x) { return x; }
  // Whether this forward splits activations along the sequence (after begin_forward).
  virtual bool sequence_parallel_now() const { return false; }
  // The token embedding: [B, T] -> [B, T, dim] (T / degree with sequence parallelism).
  virtual std::shared_ptr<Embedding> embedding(int64_t vocab, int64_t dim, InitOptions init);
  // An untied output head over the vocabulary (split, padded to a multiple of the degree);
  // its input comes through enter_region.
  virtual std::shared_ptr<Linear> head(int64_t in, int64_t vocab, InitOptions init);
  // This rank's first vocabulary row in embedding() / head() parts (0 here).
  virtual int64_t vocab_start(int64_t /*vocab*/) const { return 0; }

  // Mean next-token cross-entropy (targets != -100) of logits [N, this rank's vocabulary
  // part] against targets [N]. `vocab`: the rows embedding() and head() were built with (a
  // padded vocabulary); `classes` <= vocab: the real words, its first rows. Logits of the
  // padding rows take no part (probability and gradient 0), and are not copied out.
  virtual Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t vocab, int64_t classes);
  // The logits of the first `classes` words [.., classes] from this rank's part: here a view
  // of logits without their padding columns (logits itself when there are none).
  virtual Tensor gather_logits(const Tensor& logits, int64_t classes);
  // This rank's piece along the sequence (dim 1) of an activation every rank computes whole
  // (GPT's position embeddings), where sequence parallelism splits activations; x otherwise.
  virtual Tensor sequence_piece(const Tensor& x) { return x; }

  // The generator for dropout on activations that differ across tensor-parallel ranks
  // (sequence-parallel pieces, a rank's own heads or features): a per-rank stream, so that
  // ranks do not drop the same positions of different data. Null: the default generator,
  // which every rank of a tensor-parallel group must seed alike (activations that all ranks
  // hold whole then drop identically, as in one process).
  virtual Generator* sharded_generator() { return nullptr; }

  // Called by a model at the end of its constructor, with every parameter in place (the
  // tensor-parallel factory hooks the gradients of replicated parameters here).
  virtual void model_built(Module& /*model*/) {}
};

// The single-process factory every model uses unless given another.
std::shared_ptr<LayerFactory> default_layer_factory();

}  // namespace strata::nn
