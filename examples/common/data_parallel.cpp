#include "common/data_parallel.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "common/device_setup.h"
#include "strata/distributed/init.h"
#include "strata/distributed/node.h"
#include "strata/distributed/object_collectives.h"
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

namespace {

// "--shard-size 2 with --pp 2" (the options that shape HSDP's groups), for its errors.
std::string hsdp_options(const TrainOptions& o) {
  std::string out = o.shard_size == 0 ? "--hsdp" : "--shard-size " + std::to_string(o.shard_size);
  for (const auto& [option, degree] : NamedValues{{"--tp", o.tp}, {"--pp", o.pp}, {"--cp", o.cp}})
    if (degree > 1) out += std::string(" with ") + option + " " + std::to_string(degree);
  return out;
}

std::string rank_list(const dist::ProcessGroup& group) {
  std::string out;
  for (int r : group.global_ranks()) out += (out.empty() ? "" : ",") + std::to_string(r);
  return out;
}

// HSDP's groups, split from `replicas` (the mesh's data x context ranks of this tensor rank
// and pipeline stage). Each replicas group is checked against the nodes on its own, so the
// world agrees on the verdicts first: every rank refuses alike, naming the options, or all
// groups take the same shard size (one layout for the checkpoints and the banner).
parallel::HybridShardGroups hybrid_shard_groups(dist::ProcessGroup& replicas, const TrainOptions& o) {
  dist::ProcessGroup& world = dist::world();
  const std::vector<std::string> nodes = dist::all_gather_strings(world, dist::node_name());
  std::vector<std::string> replica_nodes;
  for (int r : replicas.global_ranks()) replica_nodes.push_back(nodes.at(static_cast<size_t>(r)));
  const std::string what = hsdp_options(o) + " (HSDP over the " + std::to_string(replicas.size()) +
                           " data ranks that hold the same parameters, world ranks " + rank_list(replicas) + ")";
  std::string error;
  int shard_size = 0;
  try {
    shard_size = parallel::plan_hybrid_shard_size(replica_nodes, o.shard_size);
  } catch (const std::exception& e) {
    error = e.what();
  }
  dist::agree_on_success(world, error, what);
  const std::vector<std::string> sizes = dist::all_gather_strings(world, std::to_string(shard_size));
  for (size_t r = 1; r < sizes.size(); ++r)
    STRATA_CHECK(sizes[r] == sizes[0], hsdp_options(o), ": a shard group (one node's share of the data ranks) ",
                 "would hold ", sizes[0], " ranks for world rank 0 but ", sizes[r], " for world rank ", r,
                 " (their tensor ranks or pipeline stages lie differently on the nodes); HSDP takes one shard size "
                 "across the mesh: pass --shard-size N that divides every node's share of each data group");
  return parallel::make_hybrid_shard_groups(replicas, shard_size);
}

}  // namespace

DataParallelTrainer::DataParallelTrainer(nn::Module& model, dist::ProcessGroup& world, const TrainOptions& o,
                                         nn::ModulePredicate zero3_unit, dist::ProcessGroup* tensor,
                                         dist::ProcessGroup* pipeline,
                                         std::function<bool(const std::string&)> duplicate,
                                         dist::ProcessGroup* expert_data)
    : world_(world),
      clip_(o.clip),
      total_steps_(o.steps),
      skip_nonfinite_(o.skip_nonfinite_steps),
      autocast_(autocast_dtype(o)),
      scaler_(optim::GradScalerOptions{.enabled = o.autocast == "fp16"}) {
  const optim::AdamWOptions adamw{.lr = o.lr, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = o.weight_decay};
  auto groups = optim::weight_decay_groups(model.named_parameters(), o.lr, o.weight_decay);
  parallel::ZeroOptions zo;
  zo.stage = std::max(o.zero, 0);  // without --zero: stage 0, DDP
  zo.is_unit = std::move(zero3_unit);
  if (tensor != nullptr) zo.tensor_parallel = {.group = tensor, .is_split = parallel::split_parameter_predicate(model)};
  if (pipeline != nullptr) zo.pipeline_parallel = {.group = pipeline, .duplicate = std::move(duplicate)};
  if (expert_data != nullptr) zo.experts = {.data = expert_data};
  dist::ProcessGroup* shard = &world;
  if (o.shard_size >= 0) {
    // HSDP: the shard size is checked against the nodes and agreed by every rank before any split.
    hsdp_ = hybrid_shard_groups(world, o);
    shard = hsdp_.shard.get();
    zo.replicate = hsdp_.replicate.get();
    if (dist::world().rank() == 0)  // once, not once per tensor or pipeline rank
      std::printf("HSDP: ZeRO-%d sharded over %d data ranks (group '%s'), %d replicas%s\n", zo.stage, hsdp_.shard_size,
                  hsdp_.shard->name().c_str(), hsdp_.replicas,
                  hsdp_.shard_size == 1 ? "\nwarning: each node holds one rank of each data group, so the shard "
                                          "groups have one rank: nothing is sharded (DDP's memory, and all-reduce "
                                          "across nodes); place several data ranks on a node or use --zero without "
                                          "--hsdp"
                                        : "");
  }
  zero_ = std::make_unique<parallel::ZeroOptimizer>(model, adamw, *shard, zo, std::move(groups));
  schedule_ = make_lr_schedule(*zero_, o);
}

StepResult DataParallelTrainer::step(int64_t step, const Tensor& loss) { return this->step(step, loss.item()); }

StepResult DataParallelTrainer::step(int64_t step, double loss) {
  StepResult r;
  r.lr = zero_->param_groups()[0].lr;
  // The mean first: a nan or inf on any rank makes it non-finite on every rank, so all ranks
  // decide alike, before anything writes the weights.
  Tensor global = full({1}, loss, {.dtype = DType::Float64});
  if (world_.size() > 1) world_.all_reduce(global, dist::ReduceOp::Avg)->wait();
  r.loss = global.item();
  if (!std::isfinite(r.loss)) return skip_or_stop(step, r, "the loss", r.loss);
  if (scaler_.options().enabled) {
    r.loss_scale = scaler_.scale_value();
    scaler_.unscale(*zero_);  // agreed over every group: all ranks skip or step together
    if (scaler_.found_inf()) return skip_overflow(r);
  }
  if (clip_ > 0) {
    r.grad_norm = zero_->clip_grad_norm(clip_);  // across shards, stages and tensor ranks
    // With fp16 the scaler has unscaled this step: a skip must also close its step.
    if (!std::isfinite(r.grad_norm) && scaler_.options().enabled && skip_nonfinite_) return skip_overflow(r);
    if (!std::isfinite(r.grad_norm)) return skip_or_stop(step, r, "the gradient norm", r.grad_norm);
  }
  scaler_.step(*zero_);  // without fp16: zero_->step()
  scaler_.update();
  zero_->zero_grad();
  schedule_->step();
  r.skipped_steps = skipped_;
  r.overflow_steps = overflows_;
  return r;
}

StepResult DataParallelTrainer::skip_overflow(StepResult r) {
  scaler_.step(*zero_);  // records the skip: no update
  scaler_.update();      // halves the scale
  zero_->zero_grad();
  schedule_->step();  // the learning rate stays a function of the step
  r.overflow = true;
  r.skipped_steps = skipped_;
  r.overflow_steps = ++overflows_;
  return r;
}

StepResult DataParallelTrainer::skip_or_stop(int64_t step, StepResult r, const char* what, double value) {
  std::ostringstream where;
  where << "step " << step + 1 << "/" << total_steps_ << ": " << what << " is " << value;
  if (!skip_nonfinite_)
    throw NonFiniteStep(where.str() +
                        " (non-finite). Stopped before the optimizer step: the weights and optimizer "
                        "state are those after step " +
                        std::to_string(step) +
                        ", and no checkpoint of this state was written. Resume from the last checkpoint (perhaps "
                        "with a lower --lr or --clip), or pass --skip-nonfinite-steps to skip such steps");
  zero_->zero_grad();  // the step's gradients are dropped; weights and optimizer state stay
  schedule_->step();
  r.skipped = true;
  r.skipped_steps = ++skipped_;
  return r;
}

}  // namespace strata::examples
