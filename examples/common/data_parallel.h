#pragma once
// How an example's model trains on N ranks (or one process): one data-parallel path, a
// ZeroOptimizer (AdamW over weight-decay groups) at --zero STAGE, stage 0 (DDP: gradients
// averaged, every rank updates everything) without --zero, with the --lr-schedule, and the
// loss scaler of --autocast fp16.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/train_options.h"
#include "strata/core/error.h"
#include "strata/distributed/process_group.h"
#include "strata/nn/module.h"
#include "strata/optim/adam.h"
#include "strata/optim/grad_scaler.h"
#include "strata/optim/lr_scheduler.h"
#include "strata/parallel/hsdp.h"
#include "strata/parallel/zero.h"

namespace strata::examples {

struct StepResult {
  double loss = 0;             // the global batch's mean loss (the mean of the ranks' means)
  double lr = 0;               // the learning rate this step used
  double grad_norm = 0;        // before clipping (0 without --clip)
  bool skipped = false;        // --skip-nonfinite-steps skipped this step: the weights are unchanged
  int64_t skipped_steps = 0;   // steps skipped so far in this run
  double loss_scale = 0;       // --autocast fp16: the loss scale this step used (0: no scaling)
  bool overflow = false;       // --autocast fp16: the gradients overflowed, the step was skipped
  int64_t overflow_steps = 0;  // --autocast fp16: steps skipped for overflow so far in this run
};

// A step whose loss or gradient norm is nan or inf, without --skip-nonfinite-steps: thrown on
// every rank alike (the loss is averaged first, the norm is global), before the optimizer
// writes anything, so the weights and the checkpoints still hold the step before.
class NonFiniteStep : public Error {
 public:
  using Error::Error;
};

// The --lr-schedule (with --warmup, --steps, --min-lr-ratio, --decay-fraction) over `optimizer`.
std::unique_ptr<optim::LrScheduler> make_lr_schedule(optim::Optimizer& optimizer, const TrainOptions& o);

class DataParallelTrainer {
 public:
  // Collective over `data`: every rank passes the same model (rank 0's weights are
  // broadcast). `tensor` (with --tp) and `pipeline` (with --pp, and `duplicate`: the stage's
  // copies of tied parameters) make clipping count each parameter once.
  // `zero3_unit`: the modules ZeRO-3 gathers and frees as one (the model family's choice).
  // `expert_data` (with --ep): the ranks holding the same experts, which the experts'
  // gradients are reduced over (ZeroOptions::experts).
  DataParallelTrainer(nn::Module& model, dist::ProcessGroup& data, const TrainOptions& o,
                      nn::ModulePredicate zero3_unit, dist::ProcessGroup* tensor = nullptr,
                      dist::ProcessGroup* pipeline = nullptr, std::function<bool(const std::string&)> duplicate = {},
                      dist::ProcessGroup* expert_data = nullptr);
  DataParallelTrainer(const DataParallelTrainer&) = delete;
  DataParallelTrainer& operator=(const DataParallelTrainer&) = delete;

  // After loss.backward() of step `step` (0-based): averages the loss over the ranks, clips,
  // updates, zeroes the gradients and advances the schedule (collective). A nan or inf loss or
  // gradient norm throws NonFiniteStep before the update, or with --skip-nonfinite-steps
  // clears the gradients instead and returns the step marked skipped (the schedule still
  // advances: the learning rate stays a function of the step, as on a resume).
  StepResult step(int64_t step, const Tensor& loss);
  StepResult step(int64_t step, double loss);  // with this rank's loss as a number (a pipeline's)

  // --autocast fp16: backward runs from the loss times this scale (a power of two), and
  // step() unscales the gradients, skipping a step whose gradients overflowed (the scale then
  // halves; after 2000 good steps it doubles), as torch's GradScaler. 1 without.
  double loss_scale() const { return scaler_.options().enabled ? scaler_.scale_value() : 1.0; }
  std::optional<DType> autocast() const { return autocast_; }
  optim::GradScaler& loss_scaler() { return scaler_; }  // what checkpoints save of --autocast fp16

  optim::Optimizer& optimizer() { return *zero_; }
  optim::LrScheduler& schedule() { return *schedule_; }
  parallel::ZeroOptimizer* zero() { return zero_.get(); }

 private:
  // Skips (or with --skip-nonfinite-steps off, refuses) step `step`: `what` is nan or inf.
  StepResult skip_or_stop(int64_t step, StepResult r, const char* what, double value);
  // --autocast fp16: the loss scaler found inf or nan in the unscaled gradients.
  StepResult skip_overflow(StepResult r);

  dist::ProcessGroup& world_;  // the data-parallel group
  double clip_;
  int64_t total_steps_;
  bool skip_nonfinite_;
  int64_t skipped_ = 0;
  int64_t overflows_ = 0;
  std::optional<DType> autocast_;
  optim::GradScaler scaler_;
  parallel::HybridShardGroups hsdp_;  // --hsdp / --shard-size: ZeRO's shard and replicate groups
  std::unique_ptr<parallel::ZeroOptimizer> zero_;
  std::unique_ptr<optim::LrScheduler> schedule_;
};

}  // namespace strata::examples
