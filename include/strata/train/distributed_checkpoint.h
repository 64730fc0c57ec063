#pragma once
// The whole training state of any layout as one sharded checkpoint (checkpoint/sharded.h):
// model weights, fp32 master weights, optimizer state, the step, the data position, the RNG
// states and the model configuration, all named as in one process so that a save from one
// layout loads into any other (world size, DP degree, ZeRO stage 0-3, TP degree, PP degree
// and partition, parameter dtype).
//
//   train::CheckpointTarget target{.model = model, .world = world, .zero = &zero,
//                                  .data = &data_group, .tensor = &tp_group, .sampler = &sampler};
//   train::save_training_checkpoint("runs/ckpt", target, step);      // every rank calls it
//   int64_t step = train::load_training_checkpoint("runs/ckpt", target);  // every rank calls it
//
// Tensors in the checkpoint (global names and shapes):
//   model.<name>           parameters and buffers, in the run's parameter dtype
//   master.<name>          fp32 master weights (ZeRO with a parameter dtype other than the master's)
//   optim.<name>.<key>     per-element optimizer state (exp_avg, exp_avg_sq, momentum_buffer)
//   optim.<name>.step      the parameter's step count (int64 scalar), where the optimizer has one
// Metadata: "step", "optimizer.step", "sampler.<key>", "rng.seed", "rng.offset",
// "config.<field>", "layout.<what>" (informational), and the caller's extra entries; per rank:
// "tensor_rank" and "rng_tracker.<stream>.seed|offset".
//
// Who writes what: each element once. A parameter that tensor parallelism leaves whole is
// written by tensor rank 0 only; a pipeline stage's copy of a tied parameter (`duplicate`)
// not at all; replicas in the data group split each tensor into equal flat chunks; ZeRO
// stages 1-3 write what each rank owns.
#include <cstdint>
#include <functional>
#include <string>

#include "strata/checkpoint/sharded.h"
#include "strata/data/loader.h"
#include "strata/nn/module.h"
#include "strata/optim/grad_scaler.h"
#include "strata/optim/lr_scheduler.h"
#include "strata/optim/optimizer.h"
#include "strata/parallel/rng_tracker.h"
#include "strata/parallel/zero.h"

namespace strata::train {

struct CheckpointTarget {
  nn::Module& model;
  dist::ProcessGroup& world;  // every rank of the run: saves are collective over it
  // The optimizer: a plain one (alone or beside DDP) or a ZeroOptimizer, not both (a
  // ZeroOptimizer given as `optimizer` counts as `zero`). Either may be null (weights only).
  optim::Optimizer* optimizer = nullptr;
  parallel::ZeroOptimizer* zero = nullptr;
  // The data-parallel group (the ranks holding the same parameters: DDP's or ZeRO's group);
  // null: no replicas.
  dist::ProcessGroup* data = nullptr;
  // Expert parallelism: the parameters for which is_expert holds (by name; unset:
  // parallel::is_expert_parameter) are one ep rank's, the same only on the ranks of
  // `expert_data` (MeshDim::ExpertData, inside `data`), which write them. A ZeroOptimizer
  // with experts sets it. Null: no expert parallelism.
  dist::ProcessGroup* expert_data = nullptr;
  std::function<bool(const std::string&)> is_expert = {};
  // The tensor-parallel group (parameters of TensorParallelLayers are split over it); null: none.
  dist::ProcessGroup* tensor = nullptr;
  // Pipeline parallelism: true for a stage's copy of a tied parameter that another stage
  // writes (parallel::duplicate_parameters). Empty: none.
  std::function<bool(const std::string&)> duplicate = {};
  data::BatchSampler* sampler = nullptr;
  optim::LrScheduler* scheduler = nullptr;      // set to the loaded step on load
  parallel::RngTracker* rng_tracker = nullptr;  // tensor-parallel random streams
  // fp16 dynamic loss scaling: its scale and growth counter ("loss_scaler.*"), so that a
  // resumed run scales as the uninterrupted one would. A checkpoint without them (saved
  // without a scaler) leaves the scaler as it is.
  optim::GradScaler* loss_scaler = nullptr;
  // The model's configuration (e.g. gpt_config_metadata): saved as "config.<field>" and, on
  // load, compared field by field (check_config). Empty: neither.
  checkpoint::Metadata config = {};
  // Informational layout entries saved as "layout.<key>" (e.g. {"pipeline", "2"}).
  checkpoint::Metadata layout = {};
};

// This rank's pieces and metadata of the training state at `step` (no communication). With
// own_copies, every piece is a copy, so that training may go on while save_sharded writes
// them (an asynchronous save); without, pieces may view the live tensors.
checkpoint::SaveSnapshot snapshot_training_state(const CheckpointTarget& target, int64_t step,
                                                 const checkpoint::Metadata& extra = {}, bool own_copies = true);

// Collective over target.world: a new save of the whole training state into `dir`
// (see checkpoint::save_sharded for atomicity and `latest`). Call it at a step boundary
// (after optimizer step and zero_grad).
checkpoint::SaveResult save_training_checkpoint(const std::string& dir, const CheckpointTarget& target, int64_t step,
                                                const checkpoint::Metadata& extra = {},
                                                const checkpoint::SaveOptions& options = {});

struct LoadOptions {
  // Only the weights (model.*, or master.* into ZeRO's master weights): for starting a run from
  // pretrained weights (strata-ckpt import). The optimizer, sampler, RNG and scheduler keep
  // their state, and no training metadata is required. Of the configuration, only
  // weight_config's fields are compared (training_state.h).
  bool weights_only = false;
};

// Collective over target.world: restores everything the checkpoint at `path` (its `latest`
// save, or a step directory) holds into this layout, reading this rank's parts of every
// tensor from whichever pieces hold them. Returns the step saved; `extra` receives the
// caller's metadata. Errors (missing tensors, shapes that resharding does not explain,
// checksums, configuration) name the file and the tensor and fail on every rank; nothing
// is changed unless every rank read everything it needs.
int64_t load_training_checkpoint(const std::string& path, const CheckpointTarget& target,
                                 checkpoint::Metadata* extra = nullptr, const LoadOptions& options = {});

}  // namespace strata::train
