#pragma once
// How this rank's tensors map onto the global tensors of a checkpoint (internal, used by
// distributed_checkpoint.cpp). A local tensor (a tensor-parallel part, or a whole tensor)
// is a list of segments: stretches contiguous in local memory that are boxes of the global
// tensor. A flat range of the local tensor (what ZeRO or a data-parallel chunk holds) then
// maps to sub-ranges of those boxes.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "strata/checkpoint/region.h"
#include "strata/parallel/tp_layers.h"
#include "strata/train/distributed_checkpoint.h"

namespace strata::train::detail {

struct Segment {
  checkpoint::Region box;    // the whole box
  int64_t local_offset = 0;  // where it starts in the local tensor's flat memory
};

struct LocalLayout {
  Shape global_shape;
  std::vector<Segment> segments;  // in local memory order; padding elements are in none
};

// The layout of a local tensor of shape `local`: whole when `layout` is null, else rank
// `rank` of `n`'s part (ShardLayout's sections and padding). `what` names the tensor in errors.
LocalLayout local_layout(const Shape& local, const parallel::ShardLayout* layout, int rank, int n,
                         const std::string& what);

// The pieces of the local flat range [begin, end): each a region of the global tensor and
// where it starts in local flat memory.
struct RangePiece {
  checkpoint::Region region;
  int64_t local_offset = 0;
};
std::vector<RangePiece> pieces_in_range(const LocalLayout& layout, int64_t begin, int64_t end);

// This rank's place in a target's layout.
struct Place {
  int tensor_rank = 0;
  int tensor_size = 1;
  std::map<std::string, parallel::ShardLayout> split;  // tensor-parallel layouts by parameter name
};
Place place_of(const CheckpointTarget& target);
// The layout of local tensor `name` (split when tensor parallelism splits it).
LocalLayout layout_of(const Place& place, const std::string& name, const Shape& local);

// Rank metadata of a save with an optimizer: the per-parameter state keys the rank wrote
// (comma-separated, sorted) and the parameters it wrote without state.
inline constexpr const char* kStateKeysKey = "optimizer.state_keys";
inline constexpr const char* kStatelessKey = "optimizer.stateless";

// Metadata keys the training checkpoint owns: "step" and those starting "optimizer.",
// "sampler.", "rng.", "config.", "layout." (a caller's extra entries may not use them).
bool is_reserved_metadata_key(const std::string& key);

// The model's parameters by name; with `names`, also each one's data pointer to its name (how
// a plain optimizer's parameters are recognised; ZeRO-3's released parameters have no data).
std::map<std::string, Tensor> named_parameters_by_data(nn::Module& model,
                                                       std::map<const void*, std::string>* names = nullptr);

// An optimizer's per-parameter state (its state_dict()'s "state.<index>.<key>" entries) by
// flat index, then key. Scalars (0-d, e.g. Adam's step) and per-element state (shaped as the
// parameter) are told apart by their dimension count.
std::map<int64_t, std::map<std::string, Tensor>> state_by_index(const StateDict& state);

// The target with a ZeroOptimizer given as `optimizer` moved to `zero` (it is an
// optim::Optimizer, but its state is saved and loaded by the pieces each rank owns).
CheckpointTarget with_zero_resolved(const CheckpointTarget& target);

}  // namespace strata::train::detail
