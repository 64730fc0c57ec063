#pragma once
// Which blocks of a decoder each pipeline stage runs. The model is cut into p*v global stages
// of consecutive blocks (pipeline_schedule.h's layout: chunk c of pipeline rank r is global
// stage c*p + r); global stage 0 also holds the token embedding and the last one the final
// norm and head. A rank builds only its part (nn::ModelPart) of the model:
//
//   auto partition = parallel::balanced_partition(nn::parameter_counts(config), config.n_layer, p, v);
//   nn::GPT stage(config, factory, parallel::stage_part(partition, p, pp_rank));
#include <cstdint>
#include <string>
#include <vector>

#include "strata/nn/causal_lm.h"

namespace strata::parallel {

struct PipelinePartition {
  std::vector<std::vector<int64_t>> stage_blocks;  // by global stage: its blocks, consecutive and ascending

  int num_stages() const { return static_cast<int>(stage_blocks.size()); }
  // "[0-2] [3-4] [5-7]", for logs and messages.
  std::string to_string() const;
};

// p*v stages of consecutive blocks minimising the largest stage's parameter count (the
// embedding counting towards the first stage, the final norm and head towards the last),
// every stage with at least one block. Throws strata::Error naming the numbers when there are
// more stages than blocks, p or v < 1, or v > 1 does not divide the blocks.
PipelinePartition balanced_partition(const nn::ParameterCounts& counts, int64_t num_blocks, int ranks, int chunks = 1);

// Checks a partition (given by a user, or made above) for `num_blocks` blocks over p ranks of
// v chunks: p*v stages, each non-empty and consecutive, every block in exactly one stage, in
// order. Throws strata::Error naming the stage and block at fault.
void check_partition(const PipelinePartition& partition, int64_t num_blocks, int ranks, int chunks = 1);

// What pipeline rank `rank` builds: the blocks of its chunks, the embedding on rank 0, the
// head on rank p-1. (Checks the partition.)
nn::ModelPart stage_part(const PipelinePartition& partition, int ranks, int rank);

}  // namespace strata::parallel
