#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "strata/optim/optimizer.h"

namespace strata::optim {

// bfloat16/float16 parameters trained through float32 master weights in one process (what
// parallel::ZeroOptimizer's master_dtype does across ranks). Each 16-bit parameter gets a
// float32 copy; step() hands the copies the parameters' gradients (converted exactly to
// float32), steps them with the wrapped optimizer, and writes each updated copy back into its
// parameter rounded to nearest. float32/float64 parameters are stepped directly (they are
// their own masters). Parameters without a gradient are skipped.
//
//   optim::MasterWeights opt(model.parameters(), [](std::vector<Tensor> masters) {
//     return std::make_unique<optim::AdamW>(std::move(masters), optim::AdamWOptions{.lr = 3e-4});
//   });
//
// param_groups() (lr, weight_decay) are this wrapper's: schedulers scale them, and each step
// passes them to the wrapped optimizer. state_dict() is the wrapped optimizer's with, per
// 16-bit parameter, "state.<i>.master" (float32, the parameter's shape): a resumed run
// continues from the exact master values, not from the rounded parameters.
class MasterWeights : public Optimizer {
 public:
  using ListFactory = std::function<std::unique_ptr<Optimizer>(std::vector<Tensor> masters)>;
  using GroupFactory = std::function<std::unique_ptr<Optimizer>(std::vector<ParamGroup> master_groups)>;

  // The factory builds the optimizer over the masters (in the parameters' order; groups
  // keep their hyper-parameters). Parameters: defined, contiguous, each listed once;
  // bfloat16, float16, float32 or float64.
  MasterWeights(std::vector<Tensor> params, const ListFactory& make_optimizer);
  MasterWeights(std::vector<ParamGroup> groups, const GroupFactory& make_optimizer);

  void step() override;
  StateDict state_dict() const override;
  void load_state_dict(const StateDict& state) override;
  bool is_elementwise() const override { return inner_->is_elementwise(); }

  // The wrapped optimizer (over the masters) and the master of flat parameter `index` (the
  // parameter itself when it is not 16-bit).
  Optimizer& optimizer() { return *inner_; }
  const Tensor& master(int64_t index) const;

 private:
  struct Parts {
    std::vector<ParamGroup> groups;  // the model's parameters, the inner optimizer's settings
    std::vector<Tensor> masters;
    std::unique_ptr<Optimizer> inner;
  };
  explicit MasterWeights(Parts parts);
  static Parts build(std::vector<ParamGroup> groups, const GroupFactory& make_optimizer);

  std::vector<Tensor> masters_;  // by flat index
  std::unique_ptr<Optimizer> inner_;
};

}  // namespace strata::optim
