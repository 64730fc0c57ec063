#pragma once
#include "strata/autograd/node.h"

namespace strata::autograd {

// The sink of a leaf: adds the incoming gradient into leaf.grad() (in place when it exists,
// so a DDP bucket view stays a view) and then runs the leaf's post-accumulate hooks.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf);
  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) override;
  std::string_view name() const override { return "AccumulateGrad"; }
  static constexpr uint64_t kPriority = UINT64_MAX;  // run as soon as ready

 private:
  std::shared_ptr<TensorImpl> leaf_;
};

}  // namespace strata::autograd
