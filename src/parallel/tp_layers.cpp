#include "strata/parallel/tp_layers.h"

#include <algorithm>
#include <utility>

#include "backend/dispatch/device_dispatch.h"
#include "parallel/vocab_parallel_rows.h"
#include "strata/autograd/grad_mode.h"
#include "strata/ops.h"
#include "strata/parallel/tp_mappings.h"
#include "strata/tensor/factory.h"

namespace strata::parallel {
namespace {

using Parts = std::pair<nn::InitialValue, nn::InitialValue>;  // weight, bias (its value may be undefined)

ShardLayout column_layout(int64_t out, const ColumnParallelOptions& o) {
  return {.dim = 0, .full_size = out, .sections = o.sections, .pad = o.pad};
}
ShardLayout row_layout(int64_t in) { return {.dim = 1, .full_size = in}; }
ShardLayout vocab_layout(int64_t vocab) { return {.dim = 0, .full_size = vocab, .pad = true}; }

// Where rank `rank`'s part of a parameter of shape `whole` sits in it (what shard_of cuts).
nn::PartOfWhole part_of(const Shape& whole, const ShardLayout& l, int rank, int n) {
  const int64_t p = l.part_size(n);
  nn::PartOfWhole part{.whole = whole, .dim = l.dim, .runs = {}};
  if (l.pad) {
    const int64_t start = std::min<int64_t>(p * rank, l.full_size);
    const int64_t len = std::min<int64_t>(p, l.full_size - start);
    if (len > 0) part.runs.push_back({.local_start = 0, .whole_start = start, .length = len});
    return part;
  }
  const int64_t section = l.full_size / l.sections, piece = section / n;  // p = sections x piece
  for (int64_t j = 0; j < l.sections; ++j)
    part.runs.push_back({.local_start = j * piece, .whole_start = j * section + piece * rank, .length = piece});
  return part;
}

// This rank's part of a parameter of shape `whole` split by `l`, drawn as the whole one is
// (the same recipe, each element by its index in the whole): no process builds the whole.
nn::InitialValue part_value(const Shape& whole, const ShardLayout& l, nn::ParamInit how, const nn::InitOptions& init,
                            dist::ProcessGroup& g) {
  Shape local = whole;
  local[static_cast<size_t>(l.dim)] = l.part_size(g.size());
  return nn::initial_value(local, how, init, part_of(whole, l, g.rank(), g.size()));
}

Parts column_parts(int64_t in, int64_t out, bool bias, const nn::InitOptions& init, dist::ProcessGroup& g,
                   const ColumnParallelOptions& o) {
  STRATA_CHECK(!(o.gather_output && (o.pad || o.sections > 1)),
               "ColumnParallelLinear: gather_output needs an "
               "unpadded output of one section (got pad ",
               o.pad, ", sections ", o.sections, ")");
  STRATA_CHECK(in > 0 && out > 0, "ColumnParallelLinear: invalid sizes in=", in, " out=", out);
  const ShardLayout l = column_layout(out, o);
  nn::InitialValue w = part_value({out, in}, l, nn::linear_weight_init(in, init), init, g);
  nn::InitialValue b = bias ? part_value({out}, l, nn::linear_bias_init(in, init), init, g) : nn::InitialValue{};
  return {std::move(w), std::move(b)};
}

Parts row_parts(int64_t in, int64_t out, bool bias, const nn::InitOptions& init, dist::ProcessGroup& g) {
  STRATA_CHECK(in > 0 && out > 0, "RowParallelLinear: invalid sizes in=", in, " out=", out);
  nn::InitialValue w = part_value({out, in}, row_layout(in), nn::linear_weight_init(in, init), init, g);
  nn::InitialValue b = bias ? nn::initial_value({out}, nn::linear_bias_init(in, init), init) : nn::InitialValue{};
  return {std::move(w), std::move(b)};
}

nn::InitialValue vocab_part(int64_t vocab, int64_t dim, const nn::InitOptions& init, dist::ProcessGroup& g) {
  STRATA_CHECK(vocab > 0 && dim > 0, "VocabParallelEmbedding: invalid sizes ", vocab, "x", dim);
  return part_value({vocab, dim}, vocab_layout(vocab), {.kind = nn::ParamInit::Kind::Normal, .scale = init.std}, init,
                    g);
}

}  // namespace

ColumnParallelLinear::ColumnParallelLinear(int64_t in, int64_t out, bool bias, nn::InitOptions init,
                                           dist::ProcessGroup& group, ColumnParallelOptions options)
    : ColumnParallelLinear(column_parts(in, out, bias, init, group, options), init.by_name, group, options, out) {}

ColumnParallelLinear::ColumnParallelLinear(Parts parts, bool by_name, dist::ProcessGroup& group,
                                           ColumnParallelOptions options, int64_t out_features)
    : nn::Linear(std::move(parts.first), std::move(parts.second), by_name),
      group_(group),
      options_(options),
      out_features_(out_features) {}

Tensor ColumnParallelLinear::forward(const Tensor& x) {
  auto hooks = forward_hooks();
  Tensor in = !options_.enter_region       ? x
              : options_.sequence_parallel ? gather_from_sequence_region(x, 1, group_)
                                           : copy_to_tp_region(x, group_);
  Tensor y = linear(in, weight, bias);
  return options_.gather_output ? gather_from_tp_region(y, -1, group_) : y;
}

bool ColumnParallelLinear::is_local_product() const { return !options_.enter_region && !options_.gather_output; }

std::vector<std::pair<std::string, ShardLayout>> ColumnParallelLinear::shard_layouts() const {
  std::vector<std::pair<std::string, ShardLayout>> out{{"weight", column_layout(out_features_, options_)}};
  if (bias.defined()) out.emplace_back("bias", column_layout(out_features_, options_));
  return out;
}

RowParallelLinear::RowParallelLinear(int64_t in, int64_t out, bool bias, nn::InitOptions init,
                                     dist::ProcessGroup& group, RowParallelOptions options)
    : RowParallelLinear(row_parts(in, out, bias, init, group), init.by_name, group, options, in) {
  // The bias is added once after the sum; a caller summing partial outputs owns that sum.
  STRATA_CHECK(options.reduce_output || !bias,
               "RowParallelLinear: reduce_output = false leaves partial sums and takes no bias");
}

RowParallelLinear::RowParallelLinear(Parts parts, bool by_name, dist::ProcessGroup& group, RowParallelOptions options,
                                     int64_t in_features)
    : nn::Linear(std::move(parts.first), std::move(parts.second), by_name),
      group_(group),
      options_(options),
      in_features_(in_features) {}

Tensor RowParallelLinear::forward(const Tensor& x) {
  auto hooks = forward_hooks();
  Tensor in = options_.input_is_parallel ? x : scatter_to_tp_region(x, -1, group_);
  Tensor partial = linear(in, weight);  // this rank's share of x W^T
  if (!options_.reduce_output) return partial;
  const bool sp =
      options_.sequence_parallel_now != nullptr ? *options_.sequence_parallel_now : options_.sequence_parallel;
  Tensor y = sp ? reduce_scatter_to_sequence_region(partial, 1, group_) : reduce_from_tp_region(partial, group_);
  return bias.defined() ? add(y, nn::compute_param(bias)) : y;  // once, after the sum
}

bool RowParallelLinear::is_local_product() const { return options_.input_is_parallel && !options_.reduce_output; }

std::vector<std::pair<std::string, ShardLayout>> RowParallelLinear::shard_layouts() const {
  return {{"weight", row_layout(in_features_)}};
}

VocabParallelEmbedding::VocabParallelEmbedding(int64_t num_embeddings, int64_t dim, nn::InitOptions init,
                                               dist::ProcessGroup& group, bool sequence_parallel,
                                               const bool* sequence_parallel_now)
    : nn::Embedding(vocab_part(num_embeddings, dim, init, group), init.by_name),
      group_(group),
      sequence_parallel_(sequence_parallel),
      sequence_parallel_now_(sequence_parallel_now),
      vocab_size_(num_embeddings),
      vocab_start_(vocab_layout(num_embeddings).part_size(group.size()) * group.rank()) {}

Tensor VocabParallelEmbedding::forward(const Tensor& indices) {
  auto hooks = forward_hooks();
  STRATA_CHECK(indices.dtype() == DType::Int64, "VocabParallelEmbedding: indices must be int64, got ", indices.dtype());
  // Tokens outside this rank's rows look up row 0 and are replaced by 0 (masked_fill, not a
  // product with a 0/1 mask, which would leak a NaN or inf of row 0 into them); the sum over
  // ranks then holds each token's row exactly once.
  const int64_t part = weight.size(0);
  const Device device = detail::common_device("VocabParallelEmbedding", {{"indices", indices}, {"weight", weight}});
  Tensor src = indices.contiguous();
  VocabShardIndices idx = detail::on_device(
      "VocabParallelEmbedding", device,
      [&] { return vocab_cpu::vocab_shard_indices(src, vocab_size_, vocab_start_, part); },
      [&] { return vocab_cuda::vocab_shard_indices(src, vocab_size_, vocab_start_, part); });
  Tensor e = masked_fill(embedding(idx.local, weight), idx.outside.unsqueeze(-1), 0.0);
  const bool sp = sequence_parallel_now_ != nullptr ? *sequence_parallel_now_ : sequence_parallel_;
  return sp ? reduce_scatter_to_sequence_region(e, 1, group_) : reduce_from_tp_region(e, group_);
}

std::vector<std::pair<std::string, ShardLayout>> VocabParallelEmbedding::shard_layouts() const {
  return {{"weight", vocab_layout(vocab_size_)}};
}

}  // namespace strata::parallel
