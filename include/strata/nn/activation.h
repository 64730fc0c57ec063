#pragma once
// Parameterless modules around the activation ops, and Functional for any tensor function,
// so that they can sit in a Sequential.
#include <functional>
#include <utility>

#include "strata/nn/module.h"

namespace strata::nn {

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x);
};

// The tanh approximation (GPT-2's; torch.nn.GELU(approximate='tanh')).
class GELU : public Module {
 public:
  Tensor forward(const Tensor& x);
};

class Tanh : public Module {
 public:
  Tensor forward(const Tensor& x);
};

// A module that calls `fn`: Functional([](const Tensor& x) { return mul(x, 2.0); }).
class Functional : public Module {
 public:
  explicit Functional(std::function<Tensor(const Tensor&)> fn) : fn_(std::move(fn)) {}
  Tensor forward(const Tensor& x);

 private:
  std::function<Tensor(const Tensor&)> fn_;
};

}  // namespace strata::nn
