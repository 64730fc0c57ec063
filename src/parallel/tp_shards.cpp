// Cutting single-process parameters into tensor-parallel parts and putting them back.
#include <map>

#include "strata/autograd/grad_mode.h"
#include "strata/ops.h"
#include "strata/parallel/tp_layers.h"
#include "strata/parallel/tp_mappings.h"
#include "strata/tensor/factory.h"

namespace strata::parallel {
namespace {

void check_layout(const ShardLayout& l, int64_t n) {
  STRATA_CHECK(l.sections >= 1 && l.full_size >= 1, "tensor parallel: invalid layout (size ", l.full_size,
               ", sections ", l.sections, ")");
  STRATA_CHECK(!l.pad || l.sections == 1, "tensor parallel: a padded layout has one section, got ", l.sections);
  STRATA_CHECK(l.pad || l.full_size % (l.sections * n) == 0, "tensor parallel: size ", l.full_size,
               l.sections > 1 ? " (in " + std::to_string(l.sections) + " sections)" : std::string(),
               " does not divide by the tensor-parallel degree ", n);
}

}  // namespace

std::map<std::string, ShardLayout> shard_layouts_of(nn::Module& model) {
  std::map<std::string, ShardLayout> out;
  for (auto& [path, module] : model.named_modules()) {
    const auto* tp = dynamic_cast<const TensorParallelLayer*>(module);
    if (tp == nullptr) continue;
    for (const auto& [name, layout] : tp->shard_layouts()) out[path.empty() ? name : path + "." + name] = layout;
  }
  return out;
}

int64_t ShardLayout::part_size(int64_t n) const {
  check_layout(*this, n);
  return pad ? (full_size + n - 1) / n : full_size / n;
}

Tensor shard_of(const Tensor& full, const ShardLayout& layout, int rank, int n) {
  NoGradGuard no_grad;
  const int64_t d = layout.dim, p = layout.part_size(n);
  STRATA_CHECK(d >= 0 && d < full.dim() && full.size(d) == layout.full_size, "tensor parallel: a tensor of shape ",
               full.shape(), " does not have size ", layout.full_size, " along dim ", d);
  if (layout.pad) {
    Shape shape = full.shape();
    shape[static_cast<size_t>(d)] = p;
    Tensor part = zeros(shape, {.dtype = full.dtype(), .device = full.device()});
    const int64_t start = std::min<int64_t>(p * rank, layout.full_size);
    const int64_t len = std::min<int64_t>(p, layout.full_size - start);
    if (len > 0) part.narrow(d, 0, len).copy_(full.narrow(d, start, len));
    return part;
  }
  const int64_t section = layout.full_size / layout.sections, piece = section / n;
  std::vector<Tensor> pieces;
  for (int64_t j = 0; j < layout.sections; ++j) pieces.push_back(full.narrow(d, j * section + piece * rank, piece));
  return pieces.size() == 1 ? pieces[0].contiguous().clone() : cat(pieces, d);
}

Tensor unshard(const Tensor& part, const ShardLayout& layout, dist::ProcessGroup& group) {
  NoGradGuard no_grad;
  const int64_t n = group.size(), d = layout.dim, p = layout.part_size(n);
  STRATA_CHECK(part.size(d) == p, "tensor parallel: a part of shape ", part.shape(), " should have size ", p,
               " along dim ", d, " (size ", layout.full_size, " over ", n, " ranks)");
  Tensor gathered = all_gather_along(part, d, group);  // rank-major
  if (layout.pad) return gathered.narrow(d, 0, layout.full_size).contiguous();
  if (layout.sections == 1) return gathered;
  const int64_t piece = p / layout.sections;
  std::vector<Tensor> pieces;
  for (int64_t j = 0; j < layout.sections; ++j)
    for (int64_t r = 0; r < n; ++r) pieces.push_back(gathered.narrow(d, r * p + j * piece, piece));
  return cat(pieces, d);
}

void load_full_state_dict(nn::Module& model, const StateDict& full, dist::ProcessGroup& group) {
  const auto layouts = shard_layouts_of(model);
  StateDict local;
  for (const auto& [name, value] : full) {
    auto it = layouts.find(name);
    if (it == layouts.end()) {
      local[name] = value;
      continue;
    }
    const ShardLayout& l = it->second;
    STRATA_CHECK(l.dim < value.dim() && value.size(l.dim) == l.full_size, "load_full_state_dict: '", name,
                 "' has shape ", value.shape(), " but the tensor-parallel model (degree ", group.size(),
                 ") cuts it from size ", l.full_size, " along dim ", l.dim);
    local[name] = shard_of(value, l, group.rank(), group.size());
  }
  model.load_state_dict(local, /*strict=*/true);
}

std::set<std::string> split_parameter_names(nn::Module& model) {
  std::set<std::string> out;
  for (const auto& [name, layout] : shard_layouts_of(model)) out.insert(name);
  return out;
}

std::vector<Tensor> replicated_parameters(nn::Module& model) {
  const std::set<std::string> split = split_parameter_names(model);
  std::vector<Tensor> out;
  for (auto& [name, p] : model.named_parameters())
    if (split.count(name) == 0) out.push_back(p);
  return out;
}

StateDict full_state_dict(nn::Module& model, dist::ProcessGroup& group) {
  const auto layouts = shard_layouts_of(model);
  StateDict state = model.state_dict();
  // Every rank walks the names in the same (sorted) order, so the gathers line up.
  // Copies throughout: the result stays valid when ZeRO-3 releases the parameters again.
  for (auto& [name, value] : state) {
    auto it = layouts.find(name);
    value = it != layouts.end() ? unshard(value, it->second, group) : value.clone();
  }
  return state;
}

}  // namespace strata::parallel
