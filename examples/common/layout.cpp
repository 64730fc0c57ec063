#include "layout.h"

#include "strata/core/error.h"
#include "strata/parallel/tp_factory.h"

namespace strata::examples {

Layout make_layout(dist::ProcessGroup& world, const TrainOptions& o) {
  Layout layout;
  layout.lead = world.rank() == 0;
  layout.data = &world;
  if (o.tp <= 1) return layout;
  STRATA_CHECK(world.size() % o.tp == 0, "--tp ", o.tp, " does not divide the ", world.size(),
               " ranks: the data-parallel degree is ranks / --tp");
  layout.mesh = std::make_unique<dist::DeviceMesh>(
      world, dist::MeshShape{.pp = 1, .dp = static_cast<int>(world.size() / o.tp), .tp = static_cast<int>(o.tp)});
  layout.data = &layout.mesh->group(dist::MeshDim::Data);
  layout.tensor = &layout.mesh->group(dist::MeshDim::Tensor);
  layout.factory = std::make_shared<parallel::TensorParallelFactory>(
      *layout.tensor, parallel::TensorParallelOptions{.sequence_parallel = o.sequence_parallel, .seed = o.seed});
  return layout;
}

std::string tensor_parallel_note(const TrainOptions& o) {
  if (o.tp <= 1) return "";
  return " (data) x " + std::to_string(o.tp) + " tensor-parallel ranks" + (o.sequence_parallel ? " (sequence parallel)" : "");
}

}  // namespace strata::examples
