#pragma once
// How an example's ranks split the work: pipeline x data x tensor parallel (--pp P --tp T:
// a DeviceMesh of P pipeline stages by world / (P*T) data ranks by T tensor ranks, tensor
// innermost), with sequence parallelism on request (--sequence-parallel).
#include <memory>
#include <string>

#include "common/train_options.h"
#include "strata/core/device.h"
#include "strata/distributed/device_mesh.h"
#include "strata/nn/layer_factory.h"

namespace strata::examples {

struct Layout {
  std::unique_ptr<dist::DeviceMesh> mesh;     // null without --tp and --pp
  dist::ProcessGroup* data = nullptr;         // DDP or ZeRO, the data sampler, the loss average
  dist::ProcessGroup* tensor = nullptr;       // null without --tp
  dist::ProcessGroup* pipeline = nullptr;     // null without --pp
  std::shared_ptr<nn::LayerFactory> factory;  // the models' layers (null: one process's)
  bool lead = true;                           // rank 0 of the world: prints and writes files
  Device device = Device::cpu();              // where this rank trains (--device)
};

// Collective over `world` with --tp or --pp > 1 (it builds the mesh). Degrees that do not
// divide the world size are refused, naming them. Selects this rank's --device (current GPU).
Layout make_layout(dist::ProcessGroup& world, const TrainOptions& o);

// " (data) x 2 tensor-parallel ranks (sequence parallel) x 2 pipeline stages (1F1B, 4
// micro-batches)" for the banner; "" without --tp and --pp.
std::string tensor_parallel_note(const TrainOptions& o);

}  // namespace strata::examples
