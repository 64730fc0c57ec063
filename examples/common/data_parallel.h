#pragma once
// How an example's model trains on N ranks (or one process): one data-parallel path, a
// ZeroOptimizer (AdamW over weight-decay groups) at --zero STAGE, stage 0 (DDP: gradients
// averaged, every rank updates everything) without --zero, with the --lr-schedule.
#include <functional>
#include <memory>
#include <string>

#include "common/train_options.h"
#include "strata/distributed/process_group.h"
#include "strata/nn/module.h"
#include "strata/optim/adam.h"
#include "strata/optim/lr_scheduler.h"
#include "strata/parallel/zero.h"

namespace strata::examples {

struct StepResult {
  double loss = 0;       // the global batch's mean loss (the mean of the ranks' means)
  double lr = 0;         // the learning rate this step used
  double grad_norm = 0;  // before clipping (0 without --clip)
};

// The --lr-schedule (with --warmup, --steps, --min-lr-ratio, --decay-fraction) over `optimizer`.
std::unique_ptr<optim::LrScheduler> make_lr_schedule(optim::Optimizer& optimizer, const TrainOptions& o);

class DataParallelTrainer {
 public:
  // Collective over `data`: every rank passes the same model (rank 0's weights are
  // broadcast). `tensor` (with --tp) and `pipeline` (with --pp, and `duplicate`: the stage's
  // copies of tied parameters) make clipping count each parameter once.
  // `zero3_unit`: the modules ZeRO-3 gathers and frees as one (the model family's choice).
  DataParallelTrainer(nn::Module& model, dist::ProcessGroup& data, const TrainOptions& o,
                      nn::ModulePredicate zero3_unit, dist::ProcessGroup* tensor = nullptr,
                      dist::ProcessGroup* pipeline = nullptr, std::function<bool(const std::string&)> duplicate = {});
  DataParallelTrainer(const DataParallelTrainer&) = delete;
  DataParallelTrainer& operator=(const DataParallelTrainer&) = delete;

  // After loss.backward(): clips, updates, zeroes the gradients, advances the schedule and
  // averages the loss over the ranks (collective).
  StepResult step(const Tensor& loss);
  StepResult step(double loss);  // the same with this rank's loss as a number (a pipeline's)

  optim::Optimizer& optimizer() { return *zero_; }
  optim::LrScheduler& schedule() { return *schedule_; }
  parallel::ZeroOptimizer* zero() { return zero_.get(); }

 private:
  dist::ProcessGroup& world_;  // the data-parallel group
  double clip_;
  std::unique_ptr<parallel::ZeroOptimizer> zero_;
  std::unique_ptr<optim::LrScheduler> schedule_;
};

}  // namespace strata::examples
