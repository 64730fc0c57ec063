#pragma once
// Sampling from a model split into pipeline stages: nn::generate needs the whole model on the
// rank, so with --pp each new token comes from parallel::Pipeline::forward_logits instead (the
// whole sequence each time: a stage holds no cache of the others' keys and values).
#include <cstdint>

#include "strata/nn/generate.h"
#include "strata/parallel/pipeline.h"
#include "strata/tensor/tensor.h"

namespace strata::examples {

// Collective over the pipeline group: `prompt` int64 [1, T] followed by `new_tokens` tokens
// drawn as nn::generate draws them (options.seed: one uniform draw per token), on every rank.
Tensor generate_through(parallel::Pipeline& pipeline, const Tensor& prompt, int64_t new_tokens,
                        const nn::GenerateOptions& options);

}  // namespace strata::examples
