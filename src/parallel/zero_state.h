#pragma once
// ZeroOptimizer's internal state, shared by zero.cpp (construction, gradients, step),
// zero_stage3.cpp (gather / free / prefetch of units) and the autograd hooks.
#include <memory>
#include <string>
#include <vector>

#include "strata/parallel/flat_buffer.h"
#include "strata/parallel/zero.h"

namespace strata::parallel {

struct ZeroOptimizer::State : std::enable_shared_from_this<ZeroOptimizer::State> {
  struct Param {
    std::string name;
    Tensor tensor;
    int bucket = -1;
    size_t entry = 0;  // in the bucket's FlatBuffer
    int group = 0;     // the user's parameter group
    bool ready = false;
  };
  struct Bucket {
    std::vector<int> params;
    std::unique_ptr<FlatBuffer> param;  // full parameters (stage 3: released when not gathered)
    std::unique_ptr<FlatBuffer> grad;   // full gradients, same layout (stages 2-3: transient)
    int64_t own_begin = 0;              // this rank's range of the buffer (stage 0: all of it)
    int64_t own_numel = 0;
    Tensor param_shard;  // [own] compute dtype (stage 3: its own memory, else a view of `param`)
    Tensor grad_shard;   // [own] compute dtype (stages 2-3: its own memory, else a view of `grad`)
    Tensor master;       // [own] master dtype; the parameter shard itself when the dtypes agree
    bool master_separate = false;
    Tensor master_grad;  // [own] master dtype: grad_shard, or a transient converted copy
    std::vector<Tensor> pieces;        // what the inner optimizer updates: views of `master`
    std::vector<int64_t> piece_begin;  // their offsets within `own`
    // Per backward pass.
    int pending = 0;
    bool launched = false;
    dist::WorkPtr work;
    Tensor reduce_out;            // stages 1-3: where the reduce_scatter writes
    bool shard_clean = true;      // stages 2-3: grad_shard is zero (write it directly)
    bool local_sums = false;      // stages 2-3: `grad` holds no_sync() sums (add, not copy)
    // Stage 3.
    const nn::Module* unit = nullptr;  // null for the root unit
    bool gathered = false;
    dist::WorkPtr gather_work;
    bool output_wrapped = false;  // this forward's output carries the gather-before-backward node
  };

  dist::ProcessGroup* group = nullptr;
  ZeroOptions options;
  int rank = 0;
  int world = 1;
  DType param_dtype = DType::Float32;
  Device device = Device::cpu();  // the parameters' (one device)
  DType master_dtype = DType::Float32;  // options.master_dtype, resolved against param_dtype
  std::vector<Param> params;
  std::vector<Bucket> buckets;
  std::unique_ptr<optim::Optimizer> inner;
  int num_groups = 1;

  // Per backward pass.
  size_t next_launch = 0;
  bool pass_active = false;
  bool reduced_in_place = false;  // stage 1: the gradient buckets hold reduced chunks
  bool grads_prepared = false;    // master_grad and the pieces' gradients are set
  // no_sync(): backward passes only accumulate locally until the next synchronised one.
  bool no_sync = false;
  bool unsynced = false;          // local sums await a synchronised backward
  bool local_pass_active = false; // a no_sync pass's end-of-backward callback is queued
  std::string reclaim_error;      // a reduction that failed in reclaim_completed()

  // Stage 3.
  int root_bucket = -1;
  std::vector<int> forward_order;       // units (bucket indices) in the last forward's order
  std::vector<int> recording;           // the forward being run now
  bool pinned = false;                  // GatheredParameters is alive: nothing is freed

  // zero.cpp
  void on_ready(int index);
  void accumulate_locally(Param& p, Bucket& b);
  void launch_in_order(bool force);
  void launch(Bucket& b);
  void finalize();
  void reclaim_completed();
  void finish_reduced_bucket(Bucket& b);
  void prepare_master_grads();
  void drop_master_grads();
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

}  // namespace strata::parallel
