#pragma once
// --pp P for an example trainer: which blocks this rank's stage holds, and the
// parallel::Pipeline that runs the schedule (--schedule, --micro-batches, --chunks) over them.
#include <cstdint>
#include <memory>

#include "common/data_parallel.h"
#include "common/layout.h"
#include "common/train_options.h"
#include "strata/nn/causal_lm.h"
#include "strata/parallel/pipeline.h"
#include "strata/profile/timeline.h"

namespace strata::examples {

// Refuses, naming the options, a pipeline with fewer blocks (--layers) than stages
// (--pp x --chunks), and --export-hf (`exporting`) with --pp: each rank holds only its stage.
void check_pipeline_options(const TrainOptions& o, int64_t layers, bool exporting);

// Model chunks per pipeline rank: --chunks with the interleaved schedule, else 1.
int pipeline_chunks(const TrainOptions& o);

// The partition of a model with these parameter counts over --pp x chunks stages.
parallel::PipelinePartition pipeline_partition(const TrainOptions& o, const nn::ParameterCounts& counts,
                                               int64_t layers);

// The part of the model this rank builds: its stage with --pp, the whole model without.
nn::ModelPart stage_of(const Layout& layout, const parallel::PipelinePartition& partition);

// One training step's FLOPs over the whole model, which a pipeline rank's model (one stage)
// cannot count: 6 x `parameters` x tokens (the matmuls, forward and backward) plus 12 x
// layers x batch x context^2 x width (attention), as GPT::flops_per_step counts them.
double whole_model_step_flops(int64_t parameters, int64_t layers, int64_t width, int64_t context, int64_t global_batch);

// Collective over the pipeline group with --pp (null without): the schedule over this rank's
// stage, reducing gradients through `trainer`'s DDP or ZeRO, spans into `timeline`.
std::unique_ptr<parallel::Pipeline> make_pipeline(nn::CausalLM& model, const Layout& layout,
                                                  const parallel::PipelinePartition& partition, const TrainOptions& o,
                                                  DataParallelTrainer& trainer, profile::Timeline& timeline);

}  // namespace strata::examples
