#pragma once
#include <array>
#include <memory>

#include "strata/distributed/process_group.h"

namespace strata::dist {

enum class MeshDim : uint8_t { Pipeline = 0, Data = 1, Tensor = 2 };

struct MeshShape {
  int pp = 1;
  int dp = 1;
  int tp = 1;
};

// pipeline x data x tensor over the world group, tensor innermost: world rank =
// (pp_coord * dp + dp_coord) * tp + tp_coord. Construction is collective over `world`
// (it splits one sub-group per dimension); a shape whose product is not world.size() is
// rejected.
class DeviceMesh {
 public:
  DeviceMesh(ProcessGroup& world, MeshShape shape);
  ProcessGroup& group(MeshDim dim);
  int coord(MeshDim dim) const;
  int size(MeshDim dim) const;
  const MeshShape& shape() const { return shape_; }
  ProcessGroup& world() { return world_; }

 private:
  ProcessGroup& world_;
  MeshShape shape_;
  std::array<int, 3> coords_{};
  std::array<std::unique_ptr<ProcessGroup>, 3> groups_;
};

}  // namespace strata::dist
