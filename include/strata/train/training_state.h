#pragma once
// Save and resume of a whole single-file training state: model, optimizer, data position,
// the default RNG stream and the step, so that a resumed run continues exactly as an
// uninterrupted one would (bit for bit). The file is a strata checkpoint (safetensors with
// checksums), written atomically: a failed save leaves the previous file intact.
#include <cstdint>
#include <string>

#include "strata/checkpoint/checkpoint.h"
#include "strata/data/loader.h"
#include "strata/nn/gpt.h"
#include "strata/nn/module.h"
#include "strata/optim/optimizer.h"

namespace strata::train {

struct TrainingStateRefs {
  nn::Module& model;
  optim::Optimizer& optimizer;
  data::BatchSampler& sampler;
  // The model's configuration (e.g. gpt_config_metadata(config)): saved as metadata
  // "config.<key>" and, on load, compared field by field (see check_config). Empty: neither.
  checkpoint::Metadata config = {};
};

// Tensors are stored as "model.<name>", "optim.<key>", "sampler.<key>"; metadata holds
// "step", "rng_seed", "rng_offset", "config.<key>" and the caller's `extra` entries.
void save_training_state(const std::string& path, const TrainingStateRefs& refs, int64_t step,
                         const checkpoint::Metadata& extra = {});
// Restores everything and returns the step saved (the number of completed steps). Errors
// name the file and the entry that is missing or does not fit.
int64_t load_training_state(const std::string& path, const TrainingStateRefs& refs, checkpoint::Metadata* extra = nullptr);

// The fields of a GPT configuration that a checkpoint must match beyond its parameter shapes
// (n_head changes no shape): vocab_size, context, n_layer, n_head, n_embd, dropout, dtype,
// param_dtype, as "config.<field>" entries.
checkpoint::Metadata gpt_config_metadata(const nn::GPTConfig& config);
// Throws strata::Error naming `where`, the field and both values when a "config.<field>"
// entry of `expected` is missing from `stored` or differs from it.
void check_config(const checkpoint::Metadata& stored, const checkpoint::Metadata& expected, const std::string& where);
// The integer metadata[key], which must be a plain decimal number in [min, max] (no sign
// unless negative, no spaces, no overflow); throws strata::Error naming `where`, the field
// and the value otherwise.
int64_t metadata_int(const checkpoint::Metadata& metadata, const std::string& key, const std::string& where,
                     int64_t min = 0, int64_t max = INT64_MAX);
uint64_t metadata_u64(const checkpoint::Metadata& metadata, const std::string& key, const std::string& where);

}  // namespace strata::train
