#pragma once
// ZeRO (Rajbhandari et al. 2020): data parallelism whose model states are sharded over the
// data-parallel group, behind one API whatever the stage:
//
//   auto& world = dist::init();
//   nn::GPT model(config);                                   // same construction on every rank
//   ZeroOptimizer zero(model, optim::AdamWOptions{...}, world, {.stage = 2});
//   optim::CosineSchedule sched(zero, {...});                // an optim::Optimizer like any other
//   for (...) {
//     model.loss(x, y).backward();                           // gradients reduced while it runs
//     zero.clip_grad_norm(1.0);                              // global norm across shards
//     zero.step();
//     zero.zero_grad();
//     sched.step();
//   }
//
// ZeroOptimizer is an optim::Optimizer: its param_groups() are the model's parameters in the
// caller's groups, whose lr and weight_decay the inner optimizer takes at every step(), so
// LR schedules, clipping and loss scaling take it as they take any optimizer.
//
// Stage 0: DDP (all_reduce of gradient buckets, every rank updates everything): the same
//          path as DistributedDataParallel (ddp.h), plus the optimizer.
// Stage 1: every rank keeps master weights and optimizer state only for its shard; gradients
//          are reduce-scattered (bucket by bucket, during backward) and the updated shards
//          all-gathered after step().
// Stage 2: as 1, and each rank keeps only its gradient shard (a bucket's full gradient lives
//          only until its reduce-scatter completes).
// Stage 3: as 2, and parameters are sharded too: each unit (an nn::Block by default; the
//          remaining parameters form the root unit) is all-gathered before its forward and
//          again before its backward, freed after each, and the next unit is prefetched.
//
// Layout. Parameters are packed into buckets (FlatBuffer: contiguous, one dtype, padded to a
// multiple of the group size N); rank r owns chunk r of every bucket. Stages 0-2 form buckets
// like DDP (reverse registration order, bucket_cap_bytes); stage 3 makes one bucket per unit.
// The model's parameters become views into the buckets (their values are kept).
//
// Mixed precision. The parameters' dtype is the compute dtype; when it differs from
// master_dtype (bf16 parameters, fp32 master), each rank keeps master weights for its shard
// in master_dtype, the optimizer updates those, and the parameters are their rounded copy.
//
// The inner optimizer (SGD, Adam, AdamW, or a factory) is built over this rank's shard:
// one 1-D tensor per (parameter, shard) overlap, in groups mirroring the parameter groups.
// Stages 1-3 need an optimizer whose update is elementwise (Optimizer::is_elementwise).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "strata/checkpoint/safetensors.h"
#include "strata/distributed/process_group.h"
#include "strata/nn/module.h"
#include "strata/nn/module_predicates.h"
#include "strata/optim/adam.h"
#include "strata/optim/grad_clip.h"
#include "strata/optim/optimizer.h"
#include "strata/optim/sgd.h"
#include "strata/parallel/expert_data_group.h"

namespace strata::parallel {

// Builds the inner optimizer over the shard's parameter groups.
using OptimizerFactory = std::function<std::unique_ptr<optim::Optimizer>(std::vector<optim::ParamGroup> groups)>;
using InnerOptimizer = std::variant<optim::SGDOptions, optim::AdamOptions, optim::AdamWOptions, OptimizerFactory>;

struct ZeroOptions {
  int stage = 1;  // 0 (DDP), 1, 2 or 3
  // Master weights and optimizer state: float32 or float64. Unset: float32 for 16-bit
  // parameters, the parameters' own dtype otherwise (float64 models keep float64 masters).
  std::optional<DType> master_dtype = std::nullopt;
  // Stages 0-2: bucket size (bytes of parameters per bucket; a larger parameter gets its own).
  int64_t bucket_cap_bytes = int64_t{25} << 20;
  // Stage 3: whether a module (by its name in the model, "h.0") is a unit. Default: each
  // nn::TransformerBlock (nn::is_transformer_block, every registered model family's
  // zero3_unit; an empty function means the same), whose operator() runs the hooks. A unit's
  // forward should return through HookScope::output() so that its parameters can be freed between
  // forward and backward; otherwise they stay gathered until its gradients are reduced.
  nn::ModulePredicate is_unit = nn::is_transformer_block;
  bool prefetch = true;  // stage 3: gather the next unit while the current one computes
  // Tensor parallelism beside ZeRO (a mesh's tensor group; ZeRO's own group is then the data
  // group): clip_grad_norm also sums the squares of the parameters that tensor parallelism
  // splits over this group, and counts the replicated ones once. is_split takes a parameter
  // name (parallel::split_parameter_predicate(model) gives it). Unset: ZeRO's group only.
  struct TensorParallel {
    dist::ProcessGroup* group = nullptr;
    std::function<bool(const std::string& name)> is_split = {};
  } tensor_parallel = {};
  // Pipeline parallelism beside ZeRO (a mesh's pipeline group): clip_grad_norm also sums the
  // squares over the stages, leaving out parameters for which `duplicate` holds (a stage's
  // copy of a tied parameter: parallel::Pipeline::duplicate_parameters()). Unset: none.
  struct PipelineParallel {
    dist::ProcessGroup* group = nullptr;
    std::function<bool(const std::string& name)> duplicate = {};
  } pipeline_parallel = {};
  // HSDP (hybrid sharding, stages 1-3): ZeRO's group is the shard group (by default one
  // node's ranks) and `replicate` the ranks that hold the same shard in the other shard
  // groups; parallel::make_hybrid_shard_groups (hsdp.h) builds both. Each bucket's
  // reduce-scattered shard is then averaged over `replicate` (one all_reduce of the shard:
  // the only traffic between shard groups), so every shard holds the gradient averaged over
  // all shard x replicate ranks; parameters are gathered inside the shard group only, and
  // clipping sums over it (replicas hold equal shards). Memory is ZeRO's at the shard
  // group's size. Unset: no replication.
  dist::ProcessGroup* replicate = nullptr;
  // Expert parallelism beside ZeRO (expert_data_group.h; stages 0-2, no HSDP): the expert
  // parameters are reduced, and at stages 1-2 sharded, over experts.data. One inner
  // optimizer; clipping and loss scaling count each expert once; checkpoints see every
  // parameter as without experts.
  ExpertDataGroup experts = {};
};

// Bytes held by this rank for the model states, by kind. Persistent memory only: stage 3's
// gathered units and stage 2/3's in-flight gradient buckets are transient (peak figures below).
struct ZeroMemory {
  int64_t parameters = 0;        // compute parameters (full, or the shard at stage 3)
  int64_t gradients = 0;         // compute-dtype gradients (full, or the shard at stages 2-3)
  int64_t master = 0;            // master weights (0 when they are the parameters themselves)
  int64_t optimizer_state = 0;   // the inner optimizer's state (e.g. Adam's exp_avg, exp_avg_sq)
  int64_t padding_elements = 0;  // elements added to make every bucket divide by N
  int64_t total() const { return parameters + gradients + master + optimizer_state; }
};

// The buckets, hooks and reductions (src/parallel/data_parallel_state.h).
struct DataParallelState;

class ZeroOptimizer : public optim::Optimizer {
 public:
  // Collective over `group`: every rank must pass a module with the same parameter names,
  // shapes and dtypes (checked); rank 0's parameters and buffers are broadcast. `groups`
  // (optional) splits the module's parameters into groups with their own lr and weight
  // decay (e.g. optim::weight_decay_groups); empty: one group with every trainable
  // parameter and the lr / weight_decay of the options (a factory's group gets lr 1e-3, no
  // decay). The module must outlive this object.
  ZeroOptimizer(nn::Module& module, const InnerOptimizer& inner, dist::ProcessGroup& group,
                const ZeroOptions& options = {}, const std::vector<optim::ParamGroup>& groups = {});
  ~ZeroOptimizer() override;
  ZeroOptimizer(const ZeroOptimizer&) = delete;
  ZeroOptimizer& operator=(const ZeroOptimizer&) = delete;

  // Zeroes the gradients (the buckets, or this rank's gradient shard). set_to_none (the
  // default, as optim::Optimizer) also clears the parameters' .grad() and forgets which
  // parameters had a gradient: one that no rank gives a gradient before the next step() is
  // skipped by it, as a single process skips it. set_to_none = false keeps that knowledge
  // (a parameter that had a gradient is stepped with a zero one, as a single process does).
  void zero_grad(bool set_to_none = true) override;
  // Updates this rank's shard with the inner optimizer (taking this optimizer's lr and
  // weight decay), then refreshes the parameters (stages 1-2: all_gather; stage 3: the
  // shard, gathered at the next use).
  void step() override;
  bool is_elementwise() const override;
  // This rank's inner optimizer state (its shard, numbered as the inner optimizer numbers its
  // pieces), in optim::Optimizer's keys. A layout-independent checkpoint of the whole
  // training state is train/distributed_checkpoint.h's.
  StateDict state_dict() const override;
  void load_state_dict(const StateDict& state) override;
  // Clips the global L2 norm of the (reduced) gradients to max_norm, like
  // optim::clip_grad_norm; the norm is summed across shards (one all_reduce of 8 bytes at
  // stages 1-3). Call it between backward and step(). Returns the norm before clipping (nan
  // or inf: gradients untouched; with options.error_if_nonfinite an error, on every rank).
  double clip_grad_norm(double max_norm, const optim::ClipOptions& options = {});
  // Loss scaling (optim::GradScaler calls it: scaler.step(zero)): multiplies this rank's
  // reduced gradient shard by `factor` in place and returns whether any rank found inf or
  // nan in its shard (an all_reduce over ZeRO's group, and the tensor and pipeline groups
  // when set), so every rank skips or steps together. Between backward and step().
  bool unscale_gradients(double factor);

  // RAII (gradient accumulation): while alive, backward passes only accumulate gradients
  // locally, without communication; the next synchronised backward (outside the guard)
  // reduces the accumulated sum, so N-1 micro-batches under no_sync() plus one outside equal
  // one backward over all of them. Any stage; at stages 2-3 the full gradient buckets stay
  // allocated while sums are pending (stage 1's gradient memory), and stage 3 still gathers
  // and frees units as usual. step() and clip_grad_norm() refuse unreduced sums; zero_grad()
  // discards them.
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(ZeroOptimizer& zero);
    ~NoSyncGuard();
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    ZeroOptimizer& zero_;
    bool previous_;
  };
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(*this); }
  // Reduces now the sums that backward passes under no_sync() accumulated, as the next
  // synchronised backward would at its end (a parameter without a gradient counts as zero).
  // For callers whose backward passes all run under no_sync(), such as a pipeline. Not during
  // backward or inside no_sync(); at stage 1 once per zero_grad().
  void sync_gradients();
  // Stages 0-2: this rank's local, not yet reduced gradient sum of parameter `name` (a view
  // of its slot in the full gradient bucket, zero when no gradient arrived yet). What is
  // written into it is what sync_gradients() reduces (a pipeline adds a tied parameter's
  // other copy here).
  Tensor local_gradient(const std::string& name);

  // The inner optimizer over this rank's pieces (checkpoints read its state; its lr is set
  // from this optimizer's param_groups() at every step()).
  optim::Optimizer& optimizer();
  int stage() const;
  dist::ProcessGroup& group() { return group_; }
  nn::Module& module() { return module_; }
  const ZeroOptions& options() const;
  ZeroMemory memory() const;
  // The buckets (stage 3: units) in launch order: their parameter names and padded bytes.
  std::vector<std::vector<std::string>> bucket_parameter_names() const;
  std::vector<int64_t> bucket_bytes() const;

  // What this rank's inner optimizer updates, for layout-independent checkpoints
  // (train/distributed_checkpoint.h): elements [offset, offset + numel) of parameter `name`
  // flattened; `master` views them in the master weights (the parameter itself when the
  // dtypes agree) and is the inner optimizer's parameter number `inner_index`. Stage 0: every
  // parameter whole (shaped as it); stages 1-3: this rank's shard, 1-D.
  struct OwnedPiece {
    std::string name;
    int64_t offset = 0;
    int64_t numel = 0;
    Tensor master;
    int64_t inner_index = 0;
  };
  std::vector<OwnedPiece> owned_pieces() const;
  // Collective: after the master weights were written through owned_pieces(), sets the
  // compute parameters from them (a cast where the dtypes differ; stages 1-2 all_gather) and
  // zeroes the gradients.
  void reload_parameters_from_master();

  // Collective: a copy of every parameter's full value, by name (stage 3 gathers them).
  StateDict full_parameters();
  // RAII, collective: at stage 3 gathers every unit so that the module's parameters can be
  // read (evaluation, export) and frees them again at the end; a no-op at stages 0-2.
  class GatheredParameters {
   public:
    explicit GatheredParameters(ZeroOptimizer& zero);
    ~GatheredParameters();
    GatheredParameters(const GatheredParameters&) = delete;
    GatheredParameters& operator=(const GatheredParameters&) = delete;

   private:
    ZeroOptimizer& zero_;
  };
  [[nodiscard]] GatheredParameters gathered_parameters() { return GatheredParameters(*this); }

 private:
  void push_hyperparameters() const;
  void pull_hyperparameters();
  void start_experts(const ZeroOptions& options);

  // The states: state_, then experts_ when options.experts is set.
  std::vector<DataParallelState*> states() const;

  nn::Module& module_;
  dist::ProcessGroup& group_;
  std::shared_ptr<DataParallelState> state_;    // shared with the autograd hooks
  std::shared_ptr<DataParallelState> experts_;  // options.experts: the expert parameters' (state_ leads)
  std::vector<GradHookHandle> expert_scaling_;  // the experts' gradient scaling, removed with this object
};

}  // namespace strata::parallel
