#pragma once
// How an example's ranks split the work: data parallel x tensor parallel (--tp T: a
// DeviceMesh of world / T data ranks by T tensor ranks, tensor innermost), with sequence
// parallelism on request (--sequence-parallel).
#include <memory>
#include <string>

#include "strata/distributed/device_mesh.h"
#include "strata/nn/layer_factory.h"
#include "train_options.h"

namespace strata::examples {

struct Layout {
  std::unique_ptr<dist::DeviceMesh> mesh;        // null without --tp
  dist::ProcessGroup* data = nullptr;            // DDP or ZeRO, the data sampler, the loss average
  dist::ProcessGroup* tensor = nullptr;          // null without --tp
  std::shared_ptr<nn::LayerFactory> factory;     // the models' layers (null: one process's)
  bool lead = true;                              // rank 0 of the world: prints and writes files
};

// Collective over `world` with --tp > 1 (it builds the mesh). A --tp that does not divide the
// world size is refused, naming both.
Layout make_layout(dist::ProcessGroup& world, const TrainOptions& o);

// " (data) x 2 tensor-parallel ranks (sequence parallel)" for the banner; "" without --tp.
std::string tensor_parallel_note(const TrainOptions& o);

}  // namespace strata::examples
