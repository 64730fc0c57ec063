#pragma once
// Recording an op for autograd with a lambda backward:
//
//   Tensor out = ...forward...;
//   if (autograd::needs_grad({a, b}))
//     autograd::record("MulBackward", {a, b}, {out}, [a = a.detach(), b = b.detach()](autograd::BackwardContext& ctx) {
//       return std::vector<Tensor>{mul(ctx.grad(0), b), mul(ctx.grad(0), a)};
//     });
//
// Capture saved tensors as t.detach(): the backward needs their values, not their history.
// Capturing an output whole would make a reference cycle (the output owns the node), and
// capturing an input whole keeps its graph alive and makes teardown recursive.
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "strata/autograd/node.h"

namespace strata::autograd {

struct BackwardContext {
  std::vector<Tensor> grads;           // one per forward output (zeros where none arrived)
  std::vector<bool> needs_input_grad;  // one per forward input
  const Tensor& grad(size_t i = 0) const { return grads[i]; }
  bool needs(size_t i) const { return needs_input_grad[i]; }
};

// Returns one gradient per forward input; undefined where !ctx.needs(i).
using BackwardFn = std::function<std::vector<Tensor>(BackwardContext&)>;

// True when grad mode is on and any defined input requires grad.
bool needs_grad(std::initializer_list<Tensor> inputs);
bool needs_grad(const std::vector<Tensor>& inputs);

// Makes `outputs` require grad with a node named `name` whose backward is `fn`.
void record(std::string name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs, BackwardFn fn);

}  // namespace strata::autograd
