#pragma once
// How an example trains the model it built, in any layout: the pipeline stage's copies of tied
// parameters, DDP or ZeRO (DataParallelTrainer), the --timeline, and the pipeline schedule
// with --pp; one training step over them, and the training state a checkpoint covers. The
// trainers build their models differently (GPT, LLaMA) and train them the same way.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/checkpointing.h"
#include "common/data_parallel.h"
#include "common/layout.h"
#include "common/step_timeline.h"
#include "common/train_options.h"
#include "common/train_step.h"
#include "strata/data/dataset.h"
#include "strata/data/loader.h"
#include "strata/distributed/process_group.h"
#include "strata/nn/causal_lm.h"
#include "strata/parallel/pipeline.h"
#include "strata/train/distributed_checkpoint.h"
#include "strata/train/model_registry.h"

namespace strata::examples {

class ModelTraining {
 public:
  // Collective over the layout's groups: the members below are made in their order, each
  // from the ones before (the trainer broadcasts rank 0's weights; the pipeline reduces
  // through the trainer). `model` is this rank's part (`partition`'s stage with --pp); it is
  // moved to the layout's device first.
  ModelTraining(nn::CausalLM& model, const train::ModelFamily& family, const Layout& layout,
                const parallel::PipelinePartition& partition, const TrainOptions& o, dist::ProcessGroup& world);
  ModelTraining(const ModelTraining&) = delete;
  ModelTraining& operator=(const ModelTraining&) = delete;

  // Collective: forward, backward and the optimizer (or the pipeline's schedule) on `batch`
  // (moved to the layout's device), under --autocast.
  StepResult step(int64_t step, const data::Batch& batch);

  // What --save writes and --resume loads: the model, optimizer, schedule, `sampler`'s
  // position and the tensor-parallel random streams. `config` is the model's configuration
  // metadata; its param_dtype is saved with the layout instead, so that a bf16 (fp32 master)
  // save loads as float32 and back.
  train::CheckpointTarget checkpoint_target(data::BatchSampler& sampler, checkpoint::Metadata config);

  parallel::Pipeline* pipeline() { return pipeline_.get(); }  // null without --pp
  int64_t total_steps() const { return o_.steps; }
  parallel::ZeroOptimizer* zero() { return trainer_.zero(); }

 private:
  nn::CausalLM& model_;
  const Layout& layout_;
  const TrainOptions& o_;
  dist::ProcessGroup& world_;
  std::function<bool(const std::string&)> duplicate_;  // empty without --pp
  DataParallelTrainer trainer_;
  StepTimeline step_timeline_;
  std::unique_ptr<parallel::Pipeline> pipeline_;
};

// training.step, except that a step stopped by a non-finite loss (NonFiniteStep, on every
// rank) first lets a background save of an earlier step complete: the newest checkpoint is
// then the last good state, and the bad one is never saved. Any other failure (out of memory)
// is rethrown as an Error naming the step: "step 3/100 failed: out of memory on cuda:0: ...".
StepResult step_keeping_checkpoints(ModelTraining& training, Checkpointing& checkpointing, int64_t step,
                                    const data::Batch& batch);

}  // namespace strata::examples
