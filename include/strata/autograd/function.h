#pragma once
// Recording an op for autograd with a lambda backward:
//
//   Tensor out = ...forward...;
//   if (autograd::needs_grad({a, b})) {
//     Tensor sa = a.detach(), sb = b.detach();
//     autograd::record("MulBackward", {a, b}, {out}, {sa, sb}, [sa, sb](autograd::BackwardContext& ctx) {
//       return std::vector<Tensor>{mul(ctx.grad(0), sb), mul(ctx.grad(0), sa)};
//     });
//   }
//
// Capture saved tensors as t.detach(): the backward needs their values, not their history.
// Capturing an output whole would make a reference cycle (the output owns the node), and
// capturing an input whole keeps its graph alive and makes teardown recursive.
// List every tensor the backward reads in `saved` (and nothing else): record notes each one's
// version, and the backward refuses to run once one was written in place (torch's check).
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
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

// A tensor a backward reads, with the version of its memory when it was saved. Implicit
// from Tensor, so record's `saved` list reads {a, b}. Undefined tensors are never checked.
struct SavedTensor {
  SavedTensor(const Tensor& t) : tensor(t), version(t.defined() ? t.version() : 0) {}
  SavedTensor(Tensor t, uint64_t saved_version) : tensor(std::move(t)), version(saved_version) {}
  Tensor tensor;
  uint64_t version;
};

// Throws strata::Error when `saved` was written in place after it was saved, naming the
// node (`saved_by`), the tensor's dtype and shape, and both versions.
void check_unmodified(const SavedTensor& saved, std::string_view saved_by);

// Makes `outputs` require grad with a node named `name` whose backward is `fn`. `saved`: the
// tensors `fn` reads (inputs or outputs), checked with check_unmodified before it runs.
void record(std::string name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
            std::vector<SavedTensor> saved, BackwardFn fn);

}  // namespace strata::autograd
