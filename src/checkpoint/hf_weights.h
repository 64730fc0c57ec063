#pragma once
// Reading the weight files of a Hugging Face model directory (internal): model.safetensors, or
// the sharded layout save_pretrained writes above its shard size (model.safetensors.index.json,
// whose "weight_map" names the shard file that holds each tensor, beside the shards).
#include <string>

#include "strata/tensor/state_dict.h"

namespace strata::checkpoint::hf {

struct ModelWeights {
  StateDict tensors;   // by their names in the files
  std::string source;  // what they were read from (model.safetensors or the index), for messages
};

// dir/model.safetensors when it exists (transformers reads it first), else the index and every
// shard it names. Errors name the directory when it has neither file; the index and the entry
// for a malformed index, a shard name that is not a plain file name, or a missing shard; the
// shard and the tensor for a tensor the index does not list, maps to another shard, or maps to
// a shard that does not hold it.
ModelWeights read_model_weights(const std::string& dir);

}  // namespace strata::checkpoint::hf
