#pragma once
// The basic layers. Parameter names and layouts follow torch.nn (Linear weight [out, in]).
#include <cstdint>

#include "strata/core/random.h"
#include "strata/nn/module.h"

namespace strata::nn {

// Initial values: GPT-2's normal(0, init_std) weights and zero biases.
struct InitOptions {
  double std = 0.02;
  DType dtype = DType::Float32;
  Generator* gen = nullptr;  // default generator when null
};

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, InitOptions init = {});
  Tensor forward(const Tensor& x);  // [.., in] -> [.., out]
  Tensor weight;                    // [out, in]
  Tensor bias;                      // [out] or undefined
};

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim, InitOptions init = {});
  Tensor forward(const Tensor& indices);  // int64 [..] -> [.., dim]
  Tensor weight;                          // [num_embeddings, dim]
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5, DType dtype = DType::Float32);
  Tensor forward(const Tensor& x);
  Tensor weight;  // ones
  Tensor bias;    // zeros
  double eps;
};

// Uses the default generator, so its randomness is part of the saved RNG state.
class Dropout : public Module {
 public:
  explicit Dropout(double p) : p(p) {}
  Tensor forward(const Tensor& x);
  double p;
};

}  // namespace strata::nn
