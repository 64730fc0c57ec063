#pragma once
// Modules that apply a tensor function and hold no parameters: Functional for any function,
// and the activations as Functional modules, so that they can sit in a Sequential.
#include <functional>
#include <utility>

#include "strata/nn/module.h"

namespace strata::nn {

// A module that calls `fn`: Functional([](const Tensor& x) { return mul(x, 2.0); }).
class Functional : public Module {
 public:
  explicit Functional(std::function<Tensor(const Tensor&)> fn) : fn_(std::move(fn)) {}
  Tensor forward(const Tensor& x);

 private:
  std::function<Tensor(const Tensor&)> fn_;
};

class ReLU : public Functional {
 public:
  ReLU();
};

// The tanh approximation (GPT-2's; torch.nn.GELU(approximate='tanh')).
class GELU : public Functional {
 public:
  GELU();
};

class Tanh : public Functional {
 public:
  Tanh();
};

}  // namespace strata::nn
