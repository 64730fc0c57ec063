#pragma once
// How an example's ranks split the work: pipeline x data x context x tensor parallel (--pp P
// --cp C --tp T: a DeviceMesh of P pipeline stages by world / (P*C*T) data ranks by C context
// ranks by T tensor ranks, tensor innermost), with sequence parallelism on request
// (--sequence-parallel) and experts sharded over --ep of the data x context ranks.
#include <memory>
#include <string>

#include "common/train_options.h"
#include "strata/core/device.h"
#include "strata/distributed/device_mesh.h"
#include "strata/nn/context_split.h"
#include "strata/nn/layer_factory.h"

namespace strata::examples {

struct Layout {
  std::unique_ptr<dist::DeviceMesh> mesh;  // null without --tp, --pp and --cp
  dist::ProcessGroup* data = nullptr;      // the data sampler and the global batch: one slice per data rank
  // The ranks that hold the same parameters, which DDP or ZeRO reduce over and checkpoints
  // shard over: data x context (the context ranks of a sequence each hold part of its
  // gradient); the data group without --cp.
  dist::ProcessGroup* replicas = nullptr;
  dist::ProcessGroup* tensor = nullptr;    // null without --tp
  dist::ProcessGroup* pipeline = nullptr;  // null without --pp
  // --ep: the ranks that share one set of experts (tokens are exchanged over it), and the
  // ranks that hold the same experts (expert gradients are reduced over it); null without.
  dist::ProcessGroup* experts = nullptr;
  dist::ProcessGroup* expert_data = nullptr;
  // --cp: each training step's split of the sequences (null without); evaluation and
  // generation run the whole sequence on every rank.
  std::shared_ptr<nn::ContextSplit> context;
  std::shared_ptr<nn::LayerFactory> factory;  // the models' layers (null: one process's)
  bool lead = true;                           // rank 0 of the world: prints and writes files
  Device device = Device::cpu();              // where this rank trains (--device)
};

// Collective over `world` with --tp, --pp, --cp or --ep > 1 (it builds the mesh). Degrees
// that do not divide the world size, and a --shard-size that does not divide the replicas
// group, are refused first, naming them. Selects this rank's --device (current GPU).
Layout make_layout(dist::ProcessGroup& world, const TrainOptions& o);

// --cp C splits each sequence into 2C chunks: refuses a `context` (the training sequences'
// length) that is not a multiple of 2C, naming `how_to_change` (e.g. "--context").
void check_context_split(const TrainOptions& o, int64_t context, const std::string& how_to_change);

// " (data) x 2 context-parallel ranks (ring) x 2 tensor-parallel ranks (sequence parallel) x 2 pipeline stages (1F1B, 4
// micro-batches)" for the banner; "" without --tp and --pp.
std::string tensor_parallel_note(const TrainOptions& o);

}  // namespace strata::examples
