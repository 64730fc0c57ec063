#include "common/data_parallel.h"

#include <algorithm>

#include "strata/optim/param_groups.h"
#include "strata/parallel/tp_grad_norm.h"
#include "strata/tensor/factory.h"

namespace strata::examples {

std::unique_ptr<optim::LrScheduler> make_lr_schedule(optim::Optimizer& optimizer, const TrainOptions& o) {
  if (o.lr_schedule == "cosine")
    return std::make_unique<optim::CosineSchedule>(
        optimizer,
        optim::CosineScheduleOptions{.warmup_steps = o.warmup, .total_steps = o.steps, .min_lr_ratio = o.min_lr_ratio});
  if (o.lr_schedule == "wsd")
    return std::make_unique<optim::WsdSchedule>(optimizer, optim::WsdOptions{.warmup_steps = o.warmup,
                                                                             .total_steps = o.steps,
                                                                             .decay_fraction = o.decay_fraction,
                                                                             .min_lr_ratio = o.min_lr_ratio});
  STRATA_CHECK(o.lr_schedule == "linear" || o.lr_schedule == "constant", "--lr-schedule ", o.lr_schedule,
               " is not cosine, linear, constant or wsd");
  const auto decay = o.lr_schedule == "linear" ? optim::DecayShape::Linear : optim::DecayShape::Constant;
  return std::make_unique<optim::WarmupDecaySchedule>(
      optimizer, optim::WarmupDecayOptions{
                     .warmup_steps = o.warmup, .total_steps = o.steps, .decay = decay, .min_lr_ratio = o.min_lr_ratio});
}

DataParallelTrainer::DataParallelTrainer(nn::Module& model, dist::ProcessGroup& world, const TrainOptions& o,
                                         nn::ModulePredicate zero3_unit, dist::ProcessGroup* tensor,
                                         dist::ProcessGroup* pipeline,
                                         std::function<bool(const std::string&)> duplicate)
    : world_(world), clip_(o.clip) {
  const optim::AdamWOptions adamw{.lr = o.lr, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = o.weight_decay};
  auto groups = optim::weight_decay_groups(model.named_parameters(), o.lr, o.weight_decay);
  parallel::ZeroOptions zo;
  zo.stage = std::max(o.zero, 0);  // without --zero: stage 0, DDP
  zo.is_unit = std::move(zero3_unit);
  if (tensor != nullptr) zo.tensor_parallel = {.group = tensor, .is_split = parallel::split_parameter_predicate(model)};
  if (pipeline != nullptr) zo.pipeline_parallel = {.group = pipeline, .duplicate = std::move(duplicate)};
  zero_ = std::make_unique<parallel::ZeroOptimizer>(model, adamw, world, zo, std::move(groups));
  schedule_ = make_lr_schedule(*zero_, o);
}

StepResult DataParallelTrainer::step(const Tensor& loss) { return step(loss.item()); }

StepResult DataParallelTrainer::step(double loss) {
  StepResult r;
  if (clip_ > 0) r.grad_norm = zero_->clip_grad_norm(clip_);  // across shards, stages and tensor ranks
  r.lr = zero_->param_groups()[0].lr;
  zero_->step();
  zero_->zero_grad();
  schedule_->step();
  Tensor global = full({1}, loss, {.dtype = DType::Float64});
  if (world_.size() > 1) world_.all_reduce(global, dist::ReduceOp::Avg)->wait();
  r.loss = global.item();
  return r;
}

}  // namespace strata::examples
