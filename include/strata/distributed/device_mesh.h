#pragma once
#include <array>
#include <memory>

#include "strata/distributed/process_group.h"

namespace strata::dist {

// Context: context parallelism (parallel/context_parallel.h), the ranks that split one
// sequence. DataContext: the data and context ranks together (the ranks that hold the same
// parameters: DDP and ZeRO reduce over it; the data group itself when cp = 1).
// Expert: expert parallelism (parallel/expert_parallel.h), `ep` consecutive ranks of the
// DataContext group that share one set of experts; ExpertData: the DataContext ranks with
// the same Expert coordinate (they hold the same experts: expert gradients reduce over it).
// Both are carved out of DataContext, as in Megatron (ep must divide dp * cp).
enum class MeshDim : uint8_t {
  Pipeline = 0,
  Data = 1,
  Tensor = 2,
  Context = 3,
  DataContext = 4,
  Expert = 5,
  ExpertData = 6
};

struct MeshShape {
  int pp = 1;
  int dp = 1;
  int tp = 1;
  int cp = 1;  // (last, so that existing designated initialisers keep their order)
  int ep = 1;  // expert-parallel degree, dividing dp * cp (not a factor of the world size)
};

// pipeline x data x context x tensor over the world group, tensor innermost: world rank =
// ((pp_coord * dp + dp_coord) * cp + cp_coord) * tp + tp_coord (Megatron's order: a
// sequence's CP ranks sit next to each other, after its TP ranks). Construction is
// collective over `world` (it splits one sub-group per dimension, and the DataContext group
// when both dp and cp exceed 1, and the Expert and ExpertData groups when ep exceeds 1); a
// shape whose product is not world.size(), or whose ep does not divide dp * cp, is rejected.
// group(MeshDim::Expert) needs ep > 1; with ep = 1, ExpertData is DataContext.
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
  std::array<int, 4> coords_{};  // by MeshDim Pipeline, Data, Tensor, Context
  std::array<std::unique_ptr<ProcessGroup>, 7> groups_;
  void split_expert_groups();
};

}  // namespace strata::dist
