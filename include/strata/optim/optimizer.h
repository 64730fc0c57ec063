#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "strata/tensor/state_dict.h"
#include "strata/tensor/tensor.h"

namespace strata::optim {

// A set of parameters sharing hyper-parameters. `lr` is what step() uses; schedulers set it
// from `initial_lr` (filled from lr at construction when left at 0).
struct ParamGroup {
  std::vector<Tensor> params;
  double lr = 1e-3;
  double weight_decay = 0.0;
  double initial_lr = 0.0;
};

class Optimizer {
 public:
  // Checks that every parameter is a defined, contiguous float32/float64 tensor, that no
  // tensor appears twice, and that lr and weight_decay are finite and >= 0.
  explicit Optimizer(std::vector<ParamGroup> groups);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Updates every parameter that has a gradient (parameters without one are skipped).
  virtual void step() = 0;
  // Drops the gradients by default (as PyTorch 2.x): a parameter that gets none in the next
  // backward is then skipped by step(), as it would be after a restart. set_to_none = false
  // zeroes them in place instead (a zero gradient still moves a parameter under weight decay
  // or momentum). (Virtual: parallel::ZeroOptimizer keeps its own shards.)
  virtual void zero_grad(bool set_to_none = true);

  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  // Sets every group's lr to its initial_lr times `factor` (what schedulers call).
  void scale_lr(double factor);
  // True when step() updates each element from that element's own value, gradient and state
  // only (no per-tensor norms, shapes or cross-element terms), so the optimizer gives the
  // same result on any slicing of the parameters: what ZeRO needs to shard its state.
  virtual bool is_elementwise() const { return false; }
  // Number of step() calls so far (restored by load_state_dict).
  int64_t step_count() const { return step_count_; }
  // Number of parameters over all groups (the range of the flat index below).
  int64_t num_params() const;

  // Keys: "step", per parameter "state.<flat index>.<name>" (flat index counts params across
  // groups in order), and "group.<g>.lr". Scalars are one-element tensors: int64 for steps,
  // float64 for lr. Entries are copies, and a load restores them bit for bit, so a resumed
  // run continues exactly. A parameter without state (never had a gradient) has no
  // "state.<i>.*" keys. load_state_dict checks every key, shape and dtype, throws naming the
  // missing, mismatched or unexpected entry, and changes nothing unless all are valid. State
  // on another device than its parameter (a CPU checkpoint of a GPU run) is moved to it.
  virtual StateDict state_dict() const = 0;
  virtual void load_state_dict(const StateDict& state) = 0;

 protected:
  // For optimizers that keep master weights of their own (parallel::ZeroOptimizer): checks
  // the groups' hyper-parameters only, not the parameters' dtype or layout.
  Optimizer(std::vector<ParamGroup> groups, bool check_parameters);

  // Calls f(flat_index, group, param) for every parameter, in flat-index order.
  template <class F>
  void for_each_param(F&& f) const {
    int64_t index = 0;
    for (const ParamGroup& group : groups_)
      for (const Tensor& param : group.params) f(index++, group, param);
  }
  // Throws when parameters were added to or removed from param_groups() after construction
  // (per-parameter state is sized then; adding groups later is not supported).
  void check_param_count(size_t expected, const char* who) const;
  // Adds "step" and "group.<g>.lr" to `out`.
  void save_common_state(StateDict& out) const;

  std::vector<ParamGroup> groups_;
  int64_t step_count_ = 0;
};

// "state.<index>.<name>", the key of one parameter's optimizer state entry.
std::string param_state_key(int64_t index, const std::string& name);

}  // namespace strata::optim
