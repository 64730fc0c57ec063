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
#include "strata/train/model_registry.h"

namespace strata::train {

struct TrainingStateRefs {
  nn::Module& model;
  optim::Optimizer& optimizer;
  data::BatchSampler& sampler;
  // The model's configuration (e.g. config_metadata(config)): saved as metadata
  // "config.<key>" and, on load, compared field by field (see check_config). Empty: neither.
  checkpoint::Metadata config = {};
};

// Tensors are stored as "model.<name>", "optim.<key>", "sampler.<key>"; metadata holds
// "step", "rng_seed", "rng_offset", "config.<key>" and the caller's `extra` entries.
void save_training_state(const std::string& path, const TrainingStateRefs& refs, int64_t step,
                         const checkpoint::Metadata& extra = {});
// Restores everything and returns the step saved (the number of completed steps). Errors
// name the file and the entry that is missing or does not fit.
int64_t load_training_state(const std::string& path, const TrainingStateRefs& refs,
                            checkpoint::Metadata* extra = nullptr);

// Config entries for a model: config_metadata(config) (train/model_registry.h, which also
// names the family as config.family).
// Throws strata::Error naming `where`, the field and both values when a "config.<field>"
// entry of `expected` is missing from `stored` or differs from it.
void check_config(const checkpoint::Metadata& stored, const checkpoint::Metadata& expected, const std::string& where);
// The entries of a configuration (config_metadata) that a
// weights-only load compares: those that decide a weight's shape or what the weights compute.
// Left out: config.dropout (noise in training only), config.dtype and config.param_dtype (the
// values convert on load), and config.context when the configuration has config.rope_theta
// (rotary positions: no weight depends on the context length; GPT's wpe does, so it stays).
checkpoint::Metadata weight_config(const checkpoint::Metadata& config);
// The integer metadata[key], which must be a plain decimal number in [min, max] (no sign
// unless negative, no spaces, no overflow); throws strata::Error naming `where`, the field
// and the value otherwise.
int64_t metadata_int(const checkpoint::Metadata& metadata, const std::string& key, const std::string& where,
                     int64_t min = 0, int64_t max = INT64_MAX);
uint64_t metadata_u64(const checkpoint::Metadata& metadata, const std::string& key, const std::string& where);

}  // namespace strata::train
