#pragma once
// Megatron-style tensor-parallel layers over a tensor-parallel group of N ranks. Each holds
// its rank's part of the single-process layer's parameters and draws only that part: every
// element gets the value the single-process layer gives the same element (nn::fill_init
// draws by the element's index in the whole parameter, from the same generator subsequence
// or, with InitOptions::by_name, the parameter's name), so a tensor-parallel model built with
// the same seed is the single-process model, cut, and no rank builds a whole matrix.
// Parameters not listed in a layer's shard_layouts() are replicated on every rank.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "strata/distributed/process_group.h"
#include "strata/nn/layers.h"

namespace strata::parallel {

// How a tensor-parallel parameter is cut from the single-process one along `dim`: into
// `sections` equal blocks (q, k and v of a fused projection), each cut into N equal parts;
// rank r keeps part r of every block. With pad, one section whose size need not divide by N
// (a vocabulary): it is padded with zero rows to the next multiple of N.
struct ShardLayout {
  int64_t dim = 0;
  int64_t full_size = 0;  // the single-process size along dim
  int64_t sections = 1;
  bool pad = false;
  int64_t part_size(int64_t n) const;  // this rank's size along dim
  int64_t padded_size(int64_t n) const { return part_size(n) * n; }
};

// Rank `rank`'s part of the single-process tensor `full` (a copy; padding rows are zero).
Tensor shard_of(const Tensor& full, const ShardLayout& layout, int rank, int n);
// The single-process tensor from every rank's part (collective over `group`; padding dropped).
Tensor unshard(const Tensor& part, const ShardLayout& layout, dist::ProcessGroup& group);

// Implemented by every layer that holds parts of parameters.
class TensorParallelLayer {
 public:
  virtual ~TensorParallelLayer() = default;
  // Its split parameters, by local name ("weight"), with their layouts.
  virtual std::vector<std::pair<std::string, ShardLayout>> shard_layouts() const = 0;
};

struct ColumnParallelOptions {
  int64_t sections = 1;            // independent blocks of the output (3 for a fused q, k, v)
  bool pad = false;                // out need not divide by N (vocabulary heads); padding rows are zero
  bool gather_output = false;      // all-gather the output features (else each rank keeps its part)
  bool sequence_parallel = false;  // input sharded along dim 1 (the sequence): all-gather it first
  // Forward enters the TP region itself (false: the caller did, once for several column
  // layers reading the same input, so that backward all-reduces their input gradient once).
  bool enter_region = true;
};

// y = x W^T + b with W's output rows (and b) split across ranks: rank r computes its part
// of the output features. Forward enters the TP region (identity; its backward all-reduces
// the input gradient), or all-gathers the sequence with sequence_parallel.
class ColumnParallelLinear : public nn::Linear, public TensorParallelLayer {
 public:
  ColumnParallelLinear(int64_t in_features, int64_t out_features, bool bias, nn::InitOptions init,
                       dist::ProcessGroup& group, ColumnParallelOptions options = {});
  Tensor forward(const Tensor& x) override;  // [B, T, in] -> [B, T, out / N] (or out, gathered)
  bool is_local_product() const override;    // neither entering the region nor gathering
  std::vector<std::pair<std::string, ShardLayout>> shard_layouts() const override;

 private:
  ColumnParallelLinear(std::pair<nn::InitialValue, nn::InitialValue> parts, bool by_name, dist::ProcessGroup& group,
                       ColumnParallelOptions options, int64_t out_features);
  dist::ProcessGroup& group_;
  ColumnParallelOptions options_;
  int64_t out_features_;
};

struct RowParallelOptions {
  bool input_is_parallel = true;   // x is already split along its last dim (a column-parallel output)
  bool sequence_parallel = false;  // reduce-scatter the output along dim 1 instead of all-reducing it
  // When set, read at every forward instead of sequence_parallel (TensorParallelFactory
  // switches sequence parallelism per forward; it owns the flag).
  const bool* sequence_parallel_now = nullptr;
  // False: forward returns this rank's partial sums (no bias allowed), summed later by the
  // caller (reduce_from_tp_region over several layers' outputs at once).
  bool reduce_output = true;
};

// y = x W^T + b with W's input columns split across ranks: each rank multiplies its part of
// the features, the partial sums are all-reduced (one collective), then b, which every rank
// holds whole, is added once.
class RowParallelLinear : public nn::Linear, public TensorParallelLayer {
 public:
  RowParallelLinear(int64_t in_features, int64_t out_features, bool bias, nn::InitOptions init,
                    dist::ProcessGroup& group, RowParallelOptions options = {});
  Tensor forward(const Tensor& x) override;  // [B, T, in / N] -> [B, T, out]
  bool is_local_product() const override;    // partial sums of a split input (row_partial)
  std::vector<std::pair<std::string, ShardLayout>> shard_layouts() const override;

 private:
  RowParallelLinear(std::pair<nn::InitialValue, nn::InitialValue> parts, bool by_name, dist::ProcessGroup& group,
                    RowParallelOptions options, int64_t in_features);
  dist::ProcessGroup& group_;
  RowParallelOptions options_;
  int64_t in_features_;
};

// An embedding table whose rows (the vocabulary, padded to a multiple of N) are split across
// ranks: each rank looks up the tokens in its range, zeroes the others, and the all-reduce
// (or, with sequence_parallel, a reduce-scatter along the sequence) sums the parts.
class VocabParallelEmbedding : public nn::Embedding, public TensorParallelLayer {
 public:
  // sequence_parallel_now, when set, is read at every forward instead of sequence_parallel.
  VocabParallelEmbedding(int64_t num_embeddings, int64_t dim, nn::InitOptions init, dist::ProcessGroup& group,
                         bool sequence_parallel = false, const bool* sequence_parallel_now = nullptr);
  Tensor forward(const Tensor& indices) override;  // int64 [B, T] -> [B, T, dim] (T / N with sequence_parallel)
  std::vector<std::pair<std::string, ShardLayout>> shard_layouts() const override;
  int64_t vocab_start() const { return vocab_start_; }  // this rank's first row
  int64_t vocab_size() const { return vocab_size_; }    // the unpadded vocabulary

 private:
  dist::ProcessGroup& group_;
  bool sequence_parallel_;
  const bool* sequence_parallel_now_;
  int64_t vocab_size_;
  int64_t vocab_start_;
};

// Mean cross-entropy over targets != ignore_index of logits split along the vocabulary:
// logits [M, V_part] hold global columns [vocab_start, vocab_start + V_part), of which those
// >= vocab_size are padding and never receive probability. The full logits are never
// gathered: the row maxima, the sums of exponentials and the target logits are all-reduced
// over `group` (three collectives); backward is local. targets int64 [M], the same on every rank.
// logits and targets on one device, the CPU or a GPU (statistics in float64 on either; on a
// GPU the target check reads one status back).
Tensor vocab_parallel_cross_entropy(const Tensor& logits, const Tensor& targets, int64_t vocab_start,
                                    int64_t vocab_size, dist::ProcessGroup& group, int64_t ignore_index = -100);

// A single-process state dict (every parameter of the full model) loaded into a model
// built with tensor-parallel layers: split parameters get this rank's part, the rest are
// copied whole. Errors name the parameter, both shapes and the degree.
void load_full_state_dict(nn::Module& model, const StateDict& full, dist::ProcessGroup& group);
// The names of the parameters of `model` that TensorParallelLayers split, and the
// parameters every rank holds whole (all others).
std::set<std::string> split_parameter_names(nn::Module& model);
// Every split parameter's layout, by its full name in `model`.
std::map<std::string, ShardLayout> shard_layouts_of(nn::Module& model);
std::vector<Tensor> replicated_parameters(nn::Module& model);
// The single-process state dict of such a model, as copies (collective over `group`: every
// rank gets it). Under ZeRO-3, call it while a ZeroOptimizer::gathered_parameters() guard lives.
StateDict full_state_dict(nn::Module& model, dist::ProcessGroup& group);

}  // namespace strata::parallel
