#pragma once
#include "strata/autograd/node.h"

namespace strata::autograd {

// Gradient sums for every floating dtype. float32/float64 use the elementwise ops; 16-bit
// gradients (bf16/fp16 parameters cast to float32 at use) have no CPU arithmetic of their
// own, so they are summed in float32 and rounded once to the 16-bit dtype per addition.
// dst += src in place (dst keeps its storage, so a bucket view stays a view).
void accumulate_gradient_(Tensor& dst, const Tensor& src);
// a + b as a new tensor of a's dtype.
Tensor sum_gradients(const Tensor& a, const Tensor& b);
bool is_16bit_float(DType dtype);

// The sink of a leaf: passes the incoming gradient through the leaf's register_hook hooks,
// adds it into leaf.grad() (in place when it exists, so a DDP bucket view stays a view) and
// then runs the leaf's post-accumulate hooks.
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
