#pragma once
// The one data-parallel path: the flat parameter/gradient buckets of a module, the gradient
// hooks that launch a bucket's reduction as soon as it is complete, and the end-of-backward
// flush. DistributedDataParallel is this state at stage 0 without an optimizer;
// ZeroOptimizer adds the inner optimizer over this rank's shard (stages 1-3 reduce-scatter
// instead of all-reduce, stage 3 also shards the parameters). Megatron-LM's
// _ParamAndGradBuffer has the same role for its DDP and its distributed optimizer.
//
// data_parallel_build.cpp: construction and bucket rebuilds; data_parallel_reduce.cpp: the
// hooks and reductions; zero_stage3.cpp: stage 3's gather / free / prefetch; zero.cpp and
// ddp.cpp: the two public faces.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strata/optim/optimizer.h"
#include "strata/parallel/ddp.h"
#include "strata/parallel/flat_buffer.h"
#include "strata/parallel/zero.h"

namespace strata::parallel {

// How a DataParallelState reduces: ZeroOptions for ZeroOptimizer, plus what only
// DistributedDataParallel's options set (their defaults are ZeroOptimizer's behaviour).
struct DataParallelOptions {
  ZeroOptions zero;
  const char* owner = "ZeroOptimizer";  // names the public class in errors
  int64_t first_bucket_cap_bytes = 0;   // 0: as bucket_cap_bytes
  bool average = true;                  // false: gradients are summed
  bool overlap = true;                  // false: every bucket is reduced at the end of backward
  bool unused_is_error = false;         // a parameter without gradient throws after the reduction
  bool rebuild_buckets = false;         // stage 0, no optimizer: re-bucket in rank 0's ready order
  // false (DistributedDataParallel): no master weights or shards for an optimizer; the
  // parameters may mix dtypes (one bucket set per dtype), and every parameter's .grad() is its
  // bucket slot after backward whatever its dtype (DDP's contract). true (ZeroOptimizer): one
  // dtype; 16-bit gradients are summed into their slot and .grad() is cleared.
  bool has_optimizer = true;
  // Which parameters (by name) this state takes; unset: every trainable one. ZeroOptimizer
  // with experts builds two states: the rest over its group, the experts over theirs.
  std::function<bool(const std::string& name)> include = {};
  bool broadcast_buffers = true;  // false: the other state broadcasts the module's buffers
};

struct DataParallelState : std::enable_shared_from_this<DataParallelState> {
  struct Param {
    std::string name;
    Tensor tensor;
    int bucket = -1;
    size_t entry = 0;  // in the bucket's FlatBuffer
    int group = 0;     // the user's parameter group
    bool ready = false;
    // This rank holds a gradient for it: DistributedDataParallel, in this synchronised pass
    // (its .grad() was defined when it was marked ready); ZeroOptimizer, in some pass since
    // the last zero_grad(set_to_none).
    bool holds_grad = false;
    // Some rank held a gradient at the last reduction (an all_reduce of holds_grad): a
    // parameter no rank used keeps no gradient and is skipped by the step.
    bool any_rank_grad = false;
  };
  struct Bucket {
    DType dtype = DType::Float32;
    std::vector<int> params;
    std::unique_ptr<FlatBuffer> param;  // full parameters (stage 3: released when not gathered)
    std::unique_ptr<FlatBuffer> grad;   // full gradients, same layout (stages 2-3: transient)
    int64_t own_begin = 0;              // this rank's range of the buffer (stage 0: all of it)
    int64_t own_numel = 0;
    Tensor param_shard;  // [own] compute dtype (stage 3: its own memory, else a view of `param`)
    Tensor grad_shard;   // [own] compute dtype (stages 2-3: its own memory, else a view of `grad`)
    Tensor master;       // [own] master dtype; the parameter shard itself when the dtypes agree
    bool master_separate = false;
    Tensor master_grad;                // [own] master dtype: grad_shard, or a transient converted copy
    std::vector<Tensor> pieces;        // what the inner optimizer updates: views of `master`
    std::vector<int64_t> piece_begin;  // their offsets within `own`
    std::vector<int> piece_param;      // the index in `params` of each piece's parameter
    // Per backward pass.
    int pending = 0;
    bool launched = false;
    dist::WorkPtr work;
    Tensor reduce_out;        // stages 1-3: where the reduce_scatter writes
    bool shard_clean = true;  // stages 2-3: grad_shard is zero (write it directly)
    bool local_sums = false;  // stages 2-3: `grad` holds no_sync() sums (add, not copy)
    // Stage 3.
    const nn::Module* unit = nullptr;  // null for the root unit
    bool gathered = false;
    dist::WorkPtr gather_work;
    bool output_wrapped = false;  // this forward's output carries the gather-before-backward node
  };

  dist::ProcessGroup* group = nullptr;
  DataParallelOptions dp;
  ZeroOptions& options = dp.zero;  // the stage and ZeRO's settings
  CommHook hook;                   // stage 0: replaces the all_reduce of a bucket
  int rank = 0;
  int world = 1;
  DType param_dtype = DType::Float32;   // the first parameter's (ZeRO: every parameter's)
  Device device = Device::cpu();        // the parameters' (one device)
  DType master_dtype = DType::Float32;  // options.master_dtype, resolved against param_dtype
  std::vector<Param> params;
  std::vector<Bucket> buckets;
  std::unique_ptr<optim::Optimizer> inner;  // ZeroOptimizer's; null for DistributedDataParallel
  int num_groups = 1;

  // Per backward pass.
  size_t next_launch = 0;
  // HSDP: buckets below this have their shard's all_reduce over options.replicate issued.
  size_t next_replicate = 0;
  bool pass_active = false;
  bool reduced_in_place = false;  // stage 1: the gradient buckets hold reduced chunks
  bool grads_prepared = false;    // master_grad and the pieces' gradients are set
  // no_sync(): backward passes only accumulate locally until the next synchronised one.
  bool no_sync = false;
  bool unsynced = false;           // local sums await a synchronised backward
  bool local_pass_active = false;  // a no_sync pass's end-of-backward callback is queued
  std::string reclaim_error;       // a reduction that failed in reclaim_completed()
  // Bucket rebuild (DistributedDataParallel): the order rank 0's gradients became ready.
  bool rebuilt = true;
  std::vector<int> ready_order;

  // Stage 3.
  int root_bucket = -1;
  std::vector<int> forward_order;  // units (bucket indices) in the last forward's order
  // A forward has recorded forward_order (until then it is the registration order, a guess
  // not prefetched at the root: a unit that runs no hooks is then never gathered behind
  // its back, and reading it gives released_note's error).
  bool order_recorded = false;
  std::vector<int> recording;  // the forward being run now
  bool pinned = false;         // GatheredParameters is alive: nothing is freed

  // Two states over one module (ZeroOptimizer with experts): a backward pass that reaches
  // either runs both end-of-backward reductions, the leader's first, on every rank in the
  // same order (an expert state no gradient reached must still join its group's collectives).
  std::shared_ptr<DataParallelState> follower;  // on the leader
  std::weak_ptr<DataParallelState> leader;      // on the follower

  DataParallelState() = default;
  DataParallelState(const DataParallelState&) = delete;
  DataParallelState& operator=(const DataParallelState&) = delete;

  // data_parallel_reduce.cpp
  void on_ready(int index);
  void mark_ready(Param& p);
  void gradient_into_bucket(Param& p, Bucket& b);
  void accumulate_locally(Param& p, Bucket& b);
  void begin_pass();
  void finalize_all();
  void launch_in_order(bool force);
  void launch(Bucket& b);
  void replicate_up_to(size_t end);
  bool wait_keeping_error(Bucket& b);
  void finalize();
  std::vector<int> settle_unready();
  std::string wait_all();
  void reset_pass(const std::string& error);
  void reclaim_completed();
  void finish_reduced_bucket(Bucket& b);
  void prepare_master_grads();
  void drop_master_grads();
  void zero_gradients(bool set_to_none);
  void note_gradient(Param& p);
  dist::WorkPtr share_gradient_flags(Tensor& flags);
  void apply_gradient_flags(const Tensor& flags);
  // data_parallel_build.cpp
  void rebuild();
  // zero_stage3.cpp
  void install_stage3_hooks(nn::Module& root);
  void issue_gather(int b);
  void wait_gather(int b);
  void release_unit(int b);
  void before_forward(int b);
  Tensor wrap_output(int b, const Tensor& y);
  void after_forward(int b);
  void before_backward(int b);
  void root_pre_forward();
  void root_post_forward();
  int neighbour_in_forward(int b, int step) const;
};

// Collective over `group`: collects the module's trainable parameters (checked alike on every
// rank), packs them into buckets (the parameters become views of the parameter buckets),
// broadcasts rank 0's values, shards the buckets for the stage and installs the hooks.
std::shared_ptr<DataParallelState> make_data_parallel_state(nn::Module& module, dist::ProcessGroup& group,
                                                            DataParallelOptions options);

// Expert parallelism beside data parallelism (expert_data_group.h). split_by_experts makes
// `dp` take the shared parameters (experts = false) or the experts (true). check_expert_group
// refuses, before any collective, an expert-data group outside `group` or not dividing it.
// make_expert_state builds the experts' state over experts.data (collective), led by
// `leader`, and scales each expert gradient by |experts.data| / |leader's group| as it
// arrives (the hook handles go to `scaling`, for the owner to remove).
void split_by_experts(DataParallelOptions& dp, const ExpertDataGroup& experts, bool take_experts);
void check_expert_group(const ExpertDataGroup& experts, const dist::ProcessGroup& group, const char* owner);
std::shared_ptr<DataParallelState> make_expert_state(nn::Module& module,
                                                     const std::shared_ptr<DataParallelState>& leader,
                                                     DataParallelOptions options, std::vector<GradHookHandle>& scaling);

// The parts of bucket b's entries in this rank's own range: at stage 0 every entry whole,
// otherwise their overlaps with the shard (offsets within the own range).
std::vector<FlatBuffer::Piece> own_pieces(const DataParallelState& s, const DataParallelState::Bucket& b);

// Stages 2-3: a bucket's full gradient exists only while needed; this makes it exist (zero
// when it was released, or fresh).
void ensure_full_gradient(FlatBuffer& grad, Device device);

// dst += src for any floating dtype (16-bit values are summed in float and rounded once).
void accumulate_into(const Tensor& dst, const Tensor& src);

}  // namespace strata::parallel
