#pragma once
// Pipeline parallelism: each rank of a pipeline group holds some stages of a decoder
// (pipeline_partition.h) and runs a schedule (pipeline_schedule.h) over m micro-batches of
// each global batch, passing activations forward and their gradients back by send/recv.
//
//   dist::DeviceMesh mesh(world, {.pp = P, .dp = D, .tp = T});
//   auto& pp = mesh.group(dist::MeshDim::Pipeline);
//   auto partition = parallel::balanced_partition(nn::parameter_counts(config), config.n_layer, P);
//   nn::GPT model(config, factory, parallel::stage_part(partition, P, pp.rank()));
//   parallel::ZeroOptimizer zero(model, adamw, mesh.group(dist::MeshDim::Data), {.stage = 1});
//   parallel::Pipeline pipe(model, pp, partition, {.micro_batches = 8, .zero = &zero});
//   double loss = pipe.train_step(tokens, targets);  // forward + backward, gradients reduced
//   zero.step(); zero.zero_grad();
//
// Every rank of the pipeline group passes the same global batch (the first stage reads the
// tokens, the last the targets, the others only the shape). The step is the same training
// as one process running the whole model on the whole batch: each micro-batch's loss is
// weighted by its share of the batch's counted targets, the gradients accumulate over the
// micro-batches, GPT's tied token embedding gets the sum of its first- and last-stage
// gradients, and data parallelism (ddp or zero below) reduces once after the last backward.
//
// Transfers: each of the schedule's transfer batches is posted with batch_send_recv; a rank
// waits for a received tensor only when a computation needs it, and for its sends at the end
// of the step, so communication overlaps computation. Shapes are agreed with the neighbours
// once per batch shape (and schedule, m, v, dtype): a rank configured differently from its
// neighbour fails with an error naming both; a mismatch that slips through times out with
// the process group's watchdog error naming the transfer and the missing rank.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "strata/distributed/process_group.h"
#include "strata/nn/causal_lm.h"
#include "strata/parallel/ddp.h"
#include "strata/parallel/pipeline_partition.h"
#include "strata/parallel/pipeline_schedule.h"
#include "strata/parallel/zero.h"
#include "strata/profile/timeline.h"

namespace strata::parallel {

struct PipelineOptions {
  PipelineScheduleKind schedule = PipelineScheduleKind::OneFOneB;
  int micro_batches = 1;  // m: divides the batch
  int chunks = 1;         // v: model chunks per rank (Interleaved1F1B); the partition has p*v stages
  // Data parallelism beside the pipeline (at most one): the micro-batches' backwards run
  // under its no_sync() and its gradients are reduced once at the end of train_step.
  // ZeRO-3 is refused (its per-unit gathers do not fit the pipeline's interleaving).
  DistributedDataParallel* ddp = nullptr;
  ZeroOptimizer* zero = nullptr;
  profile::Timeline* timeline = nullptr;  // spans of each step while it records
};

// What the last step measured on this rank (for benchmarks and tests).
struct PipelineStepStats {
  double step_seconds = 0;            // train_step, end to end
  double compute_seconds = 0;         // forwards and backwards (the rest is waiting or bookkeeping)
  int peak_in_flight = 0;             // most chunk forwards whose activations were held at once
  int64_t peak_activation_bytes = 0;  // allocator peak during the step above its start
};

class Pipeline {
 public:
  // Collective over `group` (the pipeline group; with tied parameters it splits a group of
  // the first and last stage's ranks). `model` is this rank's part, built with
  // stage_part(partition, group.size(), group.rank()); checked, as is the partition.
  Pipeline(nn::CausalLM& model, dist::ProcessGroup& group, PipelinePartition partition, PipelineOptions options = {});
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Forward and backward of one global batch: tokens and targets int64 [B, T], B divisible
  // by m, the same on every rank of the group, on any device (they are moved to the model's).
  // Gradients are accumulated into the parameters (call zero_grad between steps as usual).
  // Returns the batch's mean loss on every rank (unscaled).
  double train_step(const Tensor& tokens, const Tensor& targets);
  // Loss scaling (optim::GradScaler with float16 autocast): train_step's backward starts from
  // the loss times `scale`, so the gradients come out multiplied by it. 1 by default.
  void set_loss_scale(double scale) { loss_scale_ = scale; }
  // The mean loss of a batch without gradients (forwards only, micro-batches as in training).
  double eval_loss(const Tensor& tokens, const Tensor& targets);
  // Full logits [B, T, vocab] of any batch on every rank (forwards only, one micro-batch;
  // the last stage's result is broadcast): for evaluation and generation.
  Tensor forward_logits(const Tensor& tokens);

  // duplicate_parameters(model, group) below.
  std::function<bool(const std::string&)> duplicate_parameters() const;

  const PipelineSchedule& schedule() const { return schedule_; }
  const PipelinePartition& partition() const { return partition_; }
  const PipelineStepStats& last_step_stats() const { return stats_; }
  bool is_first_stage() const { return group_.rank() == 0; }
  bool is_last_stage() const { return group_.rank() == group_.size() - 1; }

 private:
  struct StepState;
  enum class Mode { Train, Eval, Logits };
  Tensor run(const Tensor& tokens, const Tensor& targets, Mode mode);
  void agree_shapes(int64_t batch, int64_t seq_len);
  void forward(StepState& st, int micro_batch, int chunk);
  void backward(StepState& st, int micro_batch, int chunk);
  void post_transfers(StepState& st, const PipelineAction& action);
  void finish_gradients();
  Device model_device() const;  // where this stage's parameters (and so its activations) live

  nn::CausalLM& model_;
  dist::ProcessGroup& group_;
  PipelinePartition partition_;
  PipelineOptions options_;
  PipelineSchedule schedule_;
  PipelineSchedule forward_schedule_;               // eval: the training schedule's forwards alone
  PipelineSchedule chain_schedule_;                 // forward_logits: one micro-batch through the stages in order
  std::unique_ptr<dist::ProcessGroup> tied_group_;  // first and last stage's ranks, when they differ
  std::pair<int64_t, int64_t> agreed_shape_{-1, -1};
  PipelineStepStats stats_;
  double loss_scale_ = 1.0;
};

// True for the parameters pipeline stage `stage` holds as a copy of one another stage holds
// too (GPT's tied embedding on the last stage): gradient norms count them once
// (ModelParallelGroups::duplicate, ZeroOptions::pipeline_parallel.duplicate).
std::function<bool(const std::string&)> duplicate_parameters(const nn::CausalLM& stage,
                                                             const dist::ProcessGroup& pipeline);

}  // namespace strata::parallel
