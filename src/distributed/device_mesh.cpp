#include "strata/distributed/device_mesh.h"

#include <sstream>
#include <string>
#include <vector>

#include "strata/core/error.h"

namespace strata::dist {
namespace {

const char* dim_name(MeshDim d) {
  switch (d) {
    case MeshDim::Pipeline: return "pp";
    case MeshDim::Data: return "dp";
    case MeshDim::Tensor: return "tp";
    case MeshDim::Context: return "cp";
    case MeshDim::DataContext: return "dp_cp";
    case MeshDim::Expert: return "ep";
    case MeshDim::ExpertData: return "ep_dp";
  }
  return "?";
}

// Coordinates by MeshDim (Pipeline, Data, Tensor, Context).
using Coords = std::array<int, 4>;
constexpr size_t kPp = 0, kDp = 1, kTp = 2, kCp = 3;

int rank_of(const Coords& c, const MeshShape& s) { return ((c[kPp] * s.dp + c[kDp]) * s.cp + c[kCp]) * s.tp + c[kTp]; }

std::string group_name(MeshDim dim, const std::vector<int>& members, const ProcessGroup& world) {
  std::ostringstream name;
  name << dim_name(dim) << "(ranks ";
  for (size_t i = 0; i < members.size(); ++i)
    name << (i ? "," : "") << world.global_ranks()[static_cast<size_t>(members[i])];
  name << ")";
  return name.str();
}

}  // namespace

DeviceMesh::DeviceMesh(ProcessGroup& world, MeshShape shape) : world_(world), shape_(shape) {
  STRATA_CHECK(shape.ep >= 1 && shape.dp >= 1 && shape.cp >= 1 && (shape.dp * shape.cp) % shape.ep == 0,
               "DeviceMesh: the expert-parallel degree ep=", shape.ep, " must divide dp x cp = ", shape.dp, " x ",
               shape.cp, " (expert groups are carved out of the data and context ranks)");
  const int64_t product = static_cast<int64_t>(shape.pp) * shape.dp * shape.cp * shape.tp;
  STRATA_CHECK(shape.pp >= 1 && shape.dp >= 1 && shape.cp >= 1 && shape.tp >= 1 && product == world.size(),
               "DeviceMesh: shape pp=", shape.pp, " x dp=", shape.dp, " x tp=", shape.tp,
               shape.cp != 1 ? " x cp=" + std::to_string(shape.cp) : std::string(), " (product ", product,
               ") does not match the world size ", world.size(), " of group '", world.name(), "'");
  const Coords extent{shape.pp, shape.dp, shape.tp, shape.cp};
  const int r = world.rank();
  coords_ = {r / (shape.dp * shape.cp * shape.tp), (r / (shape.cp * shape.tp)) % shape.dp, r % shape.tp,
             (r / shape.tp) % shape.cp};
  for (size_t d = 0; d < 4; ++d) {
    // The members of this rank's group along d: vary coordinate d, keep the others.
    std::vector<int> members;
    Coords c = coords_;
    for (int i = 0; i < extent[d]; ++i) {
      c[d] = i;
      members.push_back(rank_of(c, shape));
    }
    groups_[d] = world.split(members, group_name(static_cast<MeshDim>(d), members, world));
  }
  if (shape.dp > 1 && shape.cp > 1) {
    std::vector<int> members;
    Coords c = coords_;
    for (int i = 0; i < shape.dp; ++i)
      for (int j = 0; j < shape.cp; ++j) {
        c[kDp] = i;
        c[kCp] = j;
        members.push_back(rank_of(c, shape));
      }
    groups_[static_cast<size_t>(MeshDim::DataContext)] =
        world.split(members, group_name(MeshDim::DataContext, members, world));
  }
  if (shape.ep > 1) split_expert_groups();
}

void DeviceMesh::split_expert_groups() {
  // DataContext coordinate dc = dp_coord * cp + cp_coord: the Expert group is the ep
  // consecutive dc values of this rank's block, ExpertData those with the same dc % ep.
  const int ep = shape_.ep, dc_size = shape_.dp * shape_.cp, dc = coord(MeshDim::DataContext);
  const auto world_rank_at = [&](int other_dc) {
    Coords c = coords_;
    c[kDp] = other_dc / shape_.cp;
    c[kCp] = other_dc % shape_.cp;
    return rank_of(c, shape_);
  };
  std::vector<int> expert, expert_data;
  for (int i = 0; i < ep; ++i) expert.push_back(world_rank_at(dc - dc % ep + i));
  for (int i = dc % ep; i < dc_size; i += ep) expert_data.push_back(world_rank_at(i));
  groups_[static_cast<size_t>(MeshDim::Expert)] = world_.split(expert, group_name(MeshDim::Expert, expert, world_));
  groups_[static_cast<size_t>(MeshDim::ExpertData)] =
      world_.split(expert_data, group_name(MeshDim::ExpertData, expert_data, world_));
}

ProcessGroup& DeviceMesh::group(MeshDim dim) {
  if (shape_.ep == 1 && dim == MeshDim::ExpertData) return group(MeshDim::DataContext);
  STRATA_CHECK(dim != MeshDim::Expert || shape_.ep > 1,
               "DeviceMesh: no expert group with ep=1 (build the mesh with ep > 1 for expert parallelism)");
  if (dim == MeshDim::DataContext && !groups_[static_cast<size_t>(dim)])
    return group(shape_.cp == 1 ? MeshDim::Data : MeshDim::Context);  // one of the two is the whole of it
  return *groups_[static_cast<size_t>(dim)];
}

int DeviceMesh::coord(MeshDim dim) const {
  if (dim == MeshDim::DataContext) return coords_[kDp] * shape_.cp + coords_[kCp];
  if (dim == MeshDim::Expert) return coord(MeshDim::DataContext) % shape_.ep;
  if (dim == MeshDim::ExpertData) return coord(MeshDim::DataContext) / shape_.ep;
  return coords_[static_cast<size_t>(dim)];
}

int DeviceMesh::size(MeshDim dim) const {
  switch (dim) {
    case MeshDim::Pipeline: return shape_.pp;
    case MeshDim::Data: return shape_.dp;
    case MeshDim::Tensor: return shape_.tp;
    case MeshDim::Context: return shape_.cp;
    case MeshDim::DataContext: return shape_.dp * shape_.cp;
    case MeshDim::Expert: return shape_.ep;
    case MeshDim::ExpertData: return shape_.dp * shape_.cp / shape_.ep;
  }
  return 0;
}

}  // namespace strata::dist
