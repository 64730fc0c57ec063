#include "train/checkpoint_layout.h"

#include <algorithm>

#include "strata/core/error.h"
#include "strata/parallel/expert_parallel.h"

namespace strata::train::detail {

LocalLayout local_layout(const Shape& local, const parallel::ShardLayout* layout, int rank, int n,
                         const std::string& what) {
  LocalLayout out;
  if (layout == nullptr) {
    out.global_shape = local;
    out.segments.push_back({checkpoint::Region::whole(local), 0});
    return out;
  }
  const auto d = static_cast<size_t>(layout->dim);
  STRATA_CHECK(d < local.size(), what, ": tensor-parallel dim ", d, " is outside its shape ", local);
  const int64_t part = layout->part_size(n);
  STRATA_CHECK(local[d] == part, what, ": local size ", local[d], " along dim ", d, " should be ", part, " (size ",
               layout->full_size, " over ", n, " ranks)");
  // Sections and padding are contiguous in local memory only when cut along dim 0.
  STRATA_CHECK(d == 0 || (layout->sections == 1 && !layout->pad), what, ": a tensor-parallel layout with ",
               layout->sections, " sections", layout->pad ? " and padding" : "", " along dim ", d,
               " cannot be checkpointed (only dim 0 may have sections or padding)");
  out.global_shape = local;
  out.global_shape[d] = layout->full_size;
  int64_t inner = 1;  // elements per index of dim d
  for (size_t k = d + 1; k < local.size(); ++k) inner *= local[k];
  auto box_along = [&](int64_t start, int64_t length) {
    Shape offsets(std::vector<int64_t>(local.size(), 0));
    Shape extents = local;
    offsets[d] = start;
    extents[d] = length;
    return checkpoint::Region::box(offsets, extents);
  };
  if (layout->pad) {
    const int64_t start = std::min<int64_t>(part * rank, layout->full_size);
    const int64_t length = std::min<int64_t>(part, layout->full_size - start);
    if (length > 0) out.segments.push_back({box_along(start, length), 0});
    return out;
  }
  const int64_t section = layout->full_size / layout->sections;
  const int64_t piece = section / n;
  for (int64_t j = 0; j < layout->sections; ++j)
    out.segments.push_back({box_along(j * section + piece * rank, piece), j * piece * inner});
  return out;
}

std::vector<RangePiece> pieces_in_range(const LocalLayout& layout, int64_t begin, int64_t end) {
  std::vector<RangePiece> out;
  for (const Segment& s : layout.segments) {
    const int64_t lo = std::max(begin, s.local_offset);
    const int64_t hi = std::min(end, s.local_offset + s.box.box_numel());
    if (lo >= hi) continue;
    out.push_back({s.box.sub_range(lo - s.local_offset, hi - s.local_offset), lo});
  }
  return out;
}

Place place_of(const CheckpointTarget& t) {
  Place p;
  if (t.tensor != nullptr) {
    p.tensor_rank = t.tensor->rank();
    p.tensor_size = t.tensor->size();
    p.split = parallel::shard_layouts_of(t.model);
  }
  return p;
}

LocalLayout layout_of(const Place& place, const std::string& name, const Shape& local) {
  auto it = place.split.find(name);
  return local_layout(local, it == place.split.end() ? nullptr : &it->second, place.tensor_rank, place.tensor_size,
                      "tensor '" + name + "'");
}

bool is_reserved_metadata_key(const std::string& key) {
  if (key == "step") return true;
  for (const char* prefix : {"optimizer.", "sampler.", "rng.", "config.", "layout.", "loss_scaler."})
    if (key.rfind(prefix, 0) == 0) return true;
  return false;
}

std::map<std::string, Tensor> named_parameters_by_data(nn::Module& model, std::map<const void*, std::string>* names) {
  std::map<std::string, Tensor> params;
  for (auto& [name, p] : model.named_parameters()) {
    params.emplace(name, p);
    if (names != nullptr) (*names)[p.raw_data()] = name;
  }
  return params;
}

std::map<int64_t, std::map<std::string, Tensor>> state_by_index(const StateDict& state) {
  std::map<int64_t, std::map<std::string, Tensor>> out;
  for (const auto& [key, value] : state) {
    if (key.rfind("state.", 0) != 0) continue;
    const size_t dot = key.find('.', 6);
    STRATA_CHECK(dot != std::string::npos, "optimizer state key '", key, "' is not state.<index>.<name>");
    out[std::stoll(key.substr(6, dot - 6))][key.substr(dot + 1)] = value;
  }
  return out;
}

CheckpointTarget with_zero_resolved(const CheckpointTarget& target) {
  CheckpointTarget t = target;
  if (auto* zero = dynamic_cast<parallel::ZeroOptimizer*>(t.optimizer)) {
    STRATA_CHECK(t.zero == nullptr || t.zero == zero,
                 "training checkpoint: pass either a plain optimizer or a ZeroOptimizer, not both");
    t.zero = zero;
    t.optimizer = nullptr;
  }
  if (t.zero != nullptr && t.expert_data == nullptr) t.expert_data = t.zero->options().experts.data;
  if (t.expert_data != nullptr && !t.is_expert) {
    const auto& is_expert = t.zero != nullptr ? t.zero->options().experts.is_expert : t.is_expert;
    t.is_expert = is_expert ? is_expert : parallel::is_expert_parameter;
  }
  return t;
}

}  // namespace strata::train::detail
