#include "strata/autograd/checkpoint.h"

#include <utility>

#include "strata/autograd/engine.h"
#include "strata/autograd/function.h"
#include "strata/autograd/grad_mode.h"

namespace strata::autograd {
namespace {

// (seed, offset) of each generator, the default generator first.
struct RngStates {
  std::vector<Generator*> generators;
  std::vector<std::pair<uint64_t, uint64_t>> states;

  explicit RngStates(const std::vector<Generator*>& extra) {
    generators.push_back(&default_generator());
    for (Generator* g : extra)
      if (g != nullptr) generators.push_back(g);
    for (Generator* g : generators) states.emplace_back(g->seed(), g->offset());
  }
  // Puts the saved states back; returns the states they replaced.
  RngStates swap_in() const {
    RngStates current = *this;
    for (size_t i = 0; i < generators.size(); ++i) {
      current.states[i] = {generators[i]->seed(), generators[i]->offset()};
      generators[i]->set_state(states[i].first, states[i].second);
    }
    return current;
  }
};

class GradModeScope {
 public:
  explicit GradModeScope(bool on) : previous_(grad_enabled()) { set_grad_enabled(on); }
  ~GradModeScope() { set_grad_enabled(previous_); }
  GradModeScope(const GradModeScope&) = delete;
  GradModeScope& operator=(const GradModeScope&) = delete;

 private:
  bool previous_;
};

}  // namespace

std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs,
                               const std::vector<Generator*>& generators) {
  if (!needs_grad(inputs)) return fn(inputs);
  const RngStates at_forward(generators);
  std::vector<Tensor> saved;
  saved.reserve(inputs.size());
  for (const Tensor& x : inputs) saved.push_back(x.defined() ? x.detach() : x);
  std::vector<Tensor> outputs;
  {
    NoGradGuard no_grad;  // no graph, so no activations kept
    outputs = fn(saved);
  }
  const std::vector<SavedTensor> versions(saved.begin(), saved.end());  // recompute reads the inputs
  record("CheckpointBackward", inputs, outputs, versions, [fn, saved, at_forward](BackwardContext& ctx) {
    std::vector<Tensor> leaves;
    for (size_t i = 0; i < saved.size(); ++i) {
      Tensor leaf = saved[i].defined() ? saved[i].detach() : saved[i];
      if (leaf.defined() && ctx.needs(i)) leaf.set_requires_grad(true);
      leaves.push_back(leaf);
    }
    std::vector<Tensor> recomputed;
    {
      GradModeScope grad_on(true);
      const RngStates after_forward = at_forward.swap_in();  // the forward's random draws again
      recomputed = fn(leaves);
      (void)after_forward.swap_in();
    }
    std::vector<Tensor> roots, grads;
    for (size_t i = 0; i < recomputed.size(); ++i) {
      if (!recomputed[i].requires_grad()) continue;
      roots.push_back(recomputed[i]);
      grads.push_back(ctx.grad(i));
    }
    if (!roots.empty()) backward(roots, grads);
    std::vector<Tensor> out;
    for (size_t i = 0; i < leaves.size(); ++i) out.push_back(ctx.needs(i) ? leaves[i].grad() : Tensor{});
    return out;
  });
  return outputs;
}

}  // namespace strata::autograd
