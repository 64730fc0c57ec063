#pragma once
// One training step of an example trainer: forward, backward (DDP/ZeRO reduce inside it) and
// the optimizer, or the pipeline's schedule with --pp, each a span of the --timeline.
#include <cstdint>

#include "common/data_parallel.h"
#include "common/step_timeline.h"
#include "strata/data/dataset.h"
#include "strata/nn/causal_lm.h"
#include "strata/parallel/pipeline.h"

namespace strata::examples {

// Collective over the trainer's groups. `pipeline` is null without --pp. Records the step
// when it is the one --timeline traces (and then writes the file: collective over the world).
StepResult train_step(int64_t step, nn::CausalLM& model, parallel::Pipeline* pipeline, const data::Batch& batch,
                      DataParallelTrainer& trainer, StepTimeline& timeline);

}  // namespace strata::examples
