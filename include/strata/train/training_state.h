#pragma once
// Save and resume of a whole single-file training state: model, optimizer, data position,
// the default RNG stream and the step, so that a resumed run continues exactly as an
// uninterrupted one would (bit for bit). The file is a strata checkpoint (safetensors with
// checksums), written atomically: a failed save leaves the previous file intact.
#include <cstdint>
#include <string>

#include "strata/checkpoint/checkpoint.h"
#include "strata/data/loader.h"
#include "strata/nn/module.h"
#include "strata/optim/optimizer.h"

namespace strata::train {

struct TrainingStateRefs {
  nn::Module& model;
  optim::Optimizer& optimizer;
  data::BatchSampler& sampler;
};

// Tensors are stored as "model.<name>", "optim.<key>", "sampler.<key>"; metadata holds
// "step", "rng_seed", "rng_offset" and the caller's `extra` entries.
void save_training_state(const std::string& path, const TrainingStateRefs& refs, int64_t step,
                         const checkpoint::Metadata& extra = {});
// Restores everything and returns the step saved (the number of completed steps). Errors
// name the file and the entry that is missing or does not fit.
int64_t load_training_state(const std::string& path, const TrainingStateRefs& refs, checkpoint::Metadata* extra = nullptr);

}  // namespace strata::train
