#include "common/layout.h"

#include "common/device_setup.h"
#include "strata/core/error.h"
#include "strata/parallel/tp_factory.h"

namespace strata::examples {

Layout make_layout(dist::ProcessGroup& world, const TrainOptions& o) {
  Layout layout;
  layout.lead = world.rank() == 0;
  layout.device = training_device(o);
  layout.data = &world;
  if (o.tp <= 1 && o.pp <= 1) return layout;
  STRATA_CHECK(world.size() % (o.tp * o.pp) == 0, "--pp ", o.pp, " x --tp ", o.tp, " does not divide the ",
               world.size(), " ranks: the data-parallel degree is ranks / (--pp x --tp)");
  layout.mesh =
      std::make_unique<dist::DeviceMesh>(world, dist::MeshShape{.pp = static_cast<int>(o.pp),
                                                                .dp = static_cast<int>(world.size() / (o.tp * o.pp)),
                                                                .tp = static_cast<int>(o.tp)});
  layout.data = &layout.mesh->group(dist::MeshDim::Data);
  if (o.pp > 1) layout.pipeline = &layout.mesh->group(dist::MeshDim::Pipeline);
  if (o.tp <= 1) return layout;
  layout.tensor = &layout.mesh->group(dist::MeshDim::Tensor);
  layout.factory = std::make_shared<parallel::TensorParallelFactory>(
      *layout.tensor, parallel::TensorParallelOptions{.sequence_parallel = o.sequence_parallel, .seed = o.seed});
  return layout;
}

std::string tensor_parallel_note(const TrainOptions& o) {
  std::string note;
  if (o.tp > 1)
    note += " (data) x " + std::to_string(o.tp) + " tensor-parallel ranks" +
            (o.sequence_parallel ? " (sequence parallel)" : "");
  if (o.pp > 1)
    note += std::string(o.tp > 1 ? "" : " (data)") + " x " + std::to_string(o.pp) + " pipeline stages (" + o.schedule +
            ", " + std::to_string(micro_batches(o)) + " micro-batches)";
  return note;
}

}  // namespace strata::examples
