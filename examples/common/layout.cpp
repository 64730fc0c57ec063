#include "common/layout.h"

#include <string>

#include "common/device_setup.h"
#include "strata/core/error.h"
#include "strata/parallel/context_parallel.h"
#include "strata/parallel/tp_factory.h"

namespace strata::examples {

namespace {

void check_degrees(int world_size, const TrainOptions& o) {
  for (const auto& [option, degree] : NamedValues{{"--tp", o.tp}, {"--pp", o.pp}, {"--cp", o.cp}})
    STRATA_CHECK(world_size % degree == 0, option, " ", degree, " does not divide the ", world_size, " ranks");
  STRATA_CHECK(world_size % (o.tp * o.pp * o.cp) == 0, "--pp ", o.pp, " x --cp ", o.cp, " x --tp ", o.tp,
               " does not divide the ", world_size, " ranks: the data-parallel degree is ranks / (--pp x --cp x --tp)");
  const int64_t data_context = world_size / (o.tp * o.pp);
  STRATA_CHECK(data_context % o.ep == 0, "--ep ", o.ep, " does not divide the ", data_context,
               " data x context ranks (ranks / (--pp x --tp)): each expert-parallel group is --ep of them");
}

// HSDP shards inside groups of the ranks that hold the same parameters (the replicas group:
// data x context ranks, one per tensor rank and pipeline stage): a shard size that does not
// divide it is refused here, on every rank alike, before the mesh's first collective.
void check_shard_size(int world_size, const TrainOptions& o) {
  if (o.shard_size <= 0) return;  // off, or one node's ranks (checked against the nodes)
  const int64_t replicas = world_size / (o.tp * o.pp);
  const std::string which = replicas == world_size
                                ? "every rank"
                                : std::to_string(world_size) + " ranks / (--pp " + std::to_string(o.pp) + " x --tp " +
                                      std::to_string(o.tp) + "): the data" + (o.cp > 1 ? " x context" : "") +
                                      " ranks that hold the same parameters";
  STRATA_CHECK(replicas % o.shard_size == 0, "--shard-size ", o.shard_size, ": shard size ", o.shard_size,
               " does not divide the data group's ", replicas, " ranks (", which,
               "); HSDP's shard groups are replicas of each other, so the shard size must divide it");
}

}  // namespace

Layout make_layout(dist::ProcessGroup& world, const TrainOptions& o) {
  Layout layout;
  layout.lead = world.rank() == 0;
  layout.device = training_device(o);
  layout.data = &world;
  layout.replicas = &world;
  check_degrees(world.size(), o);
  check_shard_size(world.size(), o);
  if (o.tp <= 1 && o.pp <= 1 && o.cp <= 1 && o.ep <= 1) return layout;
  layout.mesh = std::make_unique<dist::DeviceMesh>(
      world, dist::MeshShape{.pp = static_cast<int>(o.pp),
                             .dp = static_cast<int>(world.size() / (o.tp * o.pp * o.cp)),
                             .tp = static_cast<int>(o.tp),
                             .cp = static_cast<int>(o.cp),
                             .ep = static_cast<int>(o.ep)});
  layout.data = &layout.mesh->group(dist::MeshDim::Data);
  layout.replicas = &layout.mesh->group(dist::MeshDim::DataContext);
  if (o.pp > 1) layout.pipeline = &layout.mesh->group(dist::MeshDim::Pipeline);
  if (o.ep > 1) {
    layout.experts = &layout.mesh->group(dist::MeshDim::Expert);
    layout.expert_data = &layout.mesh->group(dist::MeshDim::ExpertData);
  }
  if (o.cp > 1) {
    const auto variant = o.cp_attention == "ring" ? parallel::ContextParallelAttention::Ring
                                                  : parallel::ContextParallelAttention::AllGather;
    layout.context = std::make_shared<parallel::ContextParallel>(layout.mesh->group(dist::MeshDim::Context),
                                                                 parallel::ContextParallelOptions{.variant = variant});
  }
  if (o.tp <= 1) return layout;
  layout.tensor = &layout.mesh->group(dist::MeshDim::Tensor);
  layout.factory = std::make_shared<parallel::TensorParallelFactory>(
      *layout.tensor, parallel::TensorParallelOptions{.sequence_parallel = o.sequence_parallel, .seed = o.seed});
  return layout;
}

void check_context_split(const TrainOptions& o, int64_t context, const std::string& how_to_change) {
  STRATA_CHECK(o.cp <= 1 || context % (2 * o.cp) == 0, "--cp ", o.cp, " splits each sequence into ", 2 * o.cp,
               " load-balanced chunks (rank r holds chunks r and ", 2 * o.cp, "-1-r): the sequence length ", context,
               " must be a multiple of ", 2 * o.cp, "; change ", how_to_change);
}

std::string tensor_parallel_note(const TrainOptions& o) {
  std::string note;
  if (o.cp > 1) note += " (data) x " + std::to_string(o.cp) + " context-parallel ranks (" + o.cp_attention + ")";
  if (o.tp > 1)
    note += std::string(o.cp > 1 ? "" : " (data)") + " x " + std::to_string(o.tp) + " tensor-parallel ranks" +
            (o.sequence_parallel ? " (sequence parallel)" : "");
  if (o.pp > 1)
    note += std::string(o.tp > 1 || o.cp > 1 ? "" : " (data)") + " x " + std::to_string(o.pp) + " pipeline stages (" +
            o.schedule + ", " + std::to_string(micro_batches(o)) + " micro-batches)";
  if (o.ep > 1) note += ", experts sharded over " + std::to_string(o.ep) + " expert-parallel ranks";
  return note;
}

}  // namespace strata::examples
