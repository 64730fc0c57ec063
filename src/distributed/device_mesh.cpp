#include "strata/distributed/device_mesh.h"

#include <sstream>
#include <vector>

#include "strata/core/error.h"

namespace strata::dist {
namespace {
const char* dim_name(MeshDim d) {
  switch (d) {
    case MeshDim::Pipeline: return "pp";
    case MeshDim::Data: return "dp";
    case MeshDim::Tensor: return "tp";
  }
  return "?";
}
}  // namespace

DeviceMesh::DeviceMesh(ProcessGroup& world, MeshShape shape) : world_(world), shape_(shape) {
  STRATA_CHECK(shape.pp >= 1 && shape.dp >= 1 && shape.tp >= 1 &&
                   static_cast<int64_t>(shape.pp) * shape.dp * shape.tp == world.size(),
               "DeviceMesh: shape pp=", shape.pp, " x dp=", shape.dp, " x tp=", shape.tp, " (product ",
               static_cast<int64_t>(shape.pp) * shape.dp * shape.tp, ") does not match the world size ", world.size(),
               " of group '", world.name(), "'");
  const std::array<int, 3> extent{shape.pp, shape.dp, shape.tp};
  int r = world.rank();
  coords_ = {r / (shape.dp * shape.tp), (r / shape.tp) % shape.dp, r % shape.tp};
  auto rank_of = [&](const std::array<int, 3>& c) { return (c[0] * shape.dp + c[1]) * shape.tp + c[2]; };
  for (int d = 0; d < 3; ++d) {
    // The members of this rank's group along d: vary coordinate d, keep the others.
    std::vector<int> members;
    std::array<int, 3> c = coords_;
    for (int i = 0; i < extent[static_cast<size_t>(d)]; ++i) {
      c[static_cast<size_t>(d)] = i;
      members.push_back(rank_of(c));
    }
    std::ostringstream name;
    name << dim_name(static_cast<MeshDim>(d)) << "(ranks ";
    for (size_t i = 0; i < members.size(); ++i)
      name << (i ? "," : "") << world.global_ranks()[static_cast<size_t>(members[i])];
    name << ")";
    groups_[static_cast<size_t>(d)] = world.split(members, name.str());
  }
}

ProcessGroup& DeviceMesh::group(MeshDim dim) { return *groups_[static_cast<size_t>(dim)]; }
int DeviceMesh::coord(MeshDim dim) const { return coords_[static_cast<size_t>(dim)]; }
int DeviceMesh::size(MeshDim dim) const {
  switch (dim) {
    case MeshDim::Pipeline: return shape_.pp;
    case MeshDim::Data: return shape_.dp;
    case MeshDim::Tensor: return shape_.tp;
  }
  return 0;
}

}  // namespace strata::dist
