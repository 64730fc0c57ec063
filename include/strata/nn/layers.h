#pragma once
// The basic layers. Parameter names and layouts follow torch.nn (Linear weight [out, in]).
#include <cstdint>
#include <optional>

#include "strata/core/random.h"
#include "strata/nn/module.h"

namespace strata::nn {

// How Linear draws its initial values.
enum class LinearInit {
  // torch.nn.Linear's default (kaiming_uniform_ with a = sqrt(5), whose bound works out to
  // 1/sqrt(in)): weight, then bias, uniform(-1/sqrt(in), 1/sqrt(in)). InitOptions::std is
  // not used.
  KaimingUniform,
  // GPT-2's: weight normal(0, InitOptions::std) (0.02 unless set), bias zeros. nn::GPT uses
  // this for all its Linear layers (with std 0.02 / sqrt(2 n_layer) for the projections
  // into the residual stream).
  Normal,
};

// Initial values. Embedding: normal(0, std). Linear: as linear_init says. `dtype` is the
// parameters' storage dtype. 16-bit parameters (bfloat16, float16) are drawn in float32 from
// the same generator and rounded, so such a layer equals the float32 layer rounded.
struct InitOptions {
  double std = 0.02;
  DType dtype = DType::Float32;
  Generator* gen = nullptr;                             // default generator when null
  LinearInit linear_init = LinearInit::KaimingUniform;  // Linear only
  // Draw from the parameter's full name instead of `gen`: the layer allocates zeros and
  // records how to draw, and Module::init_parameters(seed) on the model draws every such
  // parameter from (seed, its full name) (GPT and Llama build their layers this way).
  bool by_name = false;
};

// The recipes a Linear's weight ([out, in]) and bias ([out]) draw by (InitOptions).
ParamInit linear_weight_init(int64_t in_features, const InitOptions& init);
ParamInit linear_bias_init(int64_t in_features, const InitOptions& init);
// Registers `value` as parameter `name` of `module`'s kind of layer, drawn by `recipe`: now,
// from init.gen (one subsequence of it), or later by name (init.by_name). For layers that
// hold a part of a parameter, `part` says where its elements sit in the whole.
struct InitialValue {
  Tensor value;  // allocated, any contents
  ParamRecipe recipe;
};
InitialValue initial_value(const Shape& shape, ParamInit how, const InitOptions& init,
                           std::optional<PartOfWhole> part = std::nullopt);

// Mixed precision: a layer with 16-bit parameters (bfloat16, float16) computes in float32.
// The layers pass their parameters to the ops as they are: linear, embedding and layer_norm
// accept a 16-bit weight/bias with float32 compute, convert it into a float32 temporary for
// the forward only, convert it again in backward (from the 16-bit tensor, which ZeRO-3 may
// free and gather again in between), and return its gradient in its own 16-bit dtype (the
// float32 gradient rounded once). So no float32 copy of a parameter lives from forward to
// backward. compute_param is the unfused equivalent, a differentiable cast to float32 whose
// copy the consuming op saves for backward (same values, same roundings, 4 more bytes per
// parameter alive until backward); float32/float64 parameters (and undefined biases) are
// returned as they are.
Tensor compute_param(const Tensor& param);
// The dtype in which a layer with parameters of `param_dtype` computes: float32 for 16-bit
// parameters, else the parameters' own.
DType compute_dtype(DType param_dtype);

// y = x W^T + b. Initialised as init.linear_init says: PyTorch's kaiming-uniform by default,
// or GPT-2's normal(0, 0.02) with {.linear_init = LinearInit::Normal}.
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, InitOptions init = {});
  virtual Tensor forward(const Tensor& x);  // [.., in] -> [.., out]
  // True when forward(x) is exactly linear(x, weight, bias) on this rank's tensors, with no
  // communication, so that a caller may run it batched with other layers' (MoE's grouped
  // experts). A subclass that overrides forward answers false unless it overrides this too.
  virtual bool is_local_product() const;
  Tensor weight;  // [out, in]
  Tensor bias;    // [out] or undefined

 protected:
  // For layers that hold a part of the weight (tensor parallelism): registers these as
  // "weight" and "bias" (bias's value may be undefined).
  Linear(InitialValue weight, InitialValue bias, bool by_name);
};

// padding_idx (torch.nn.Embedding's; negative counts from the end): that row starts at zero
// (the other rows draw what they would without it) and its gradient is always zero.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim, InitOptions init = {},
            std::optional<int64_t> padding_idx = std::nullopt);
  virtual Tensor forward(const Tensor& indices);  // int64 [..] -> [.., dim] in compute_dtype(weight)
  Tensor weight;                                  // [num_embeddings, dim]
  std::optional<int64_t> padding_idx;             // in [0, num_embeddings) once constructed

 protected:
  Embedding(InitialValue weight, bool by_name);  // for layers holding a part of the table
};

// torch.nn.LayerNorm's switches: elementwise_affine = false registers neither parameter,
// bias = false (torch 2.1+) registers the weight only. `dtype`: the parameters' storage
// dtype (ones and zeros are exact in every dtype).
struct LayerNormOptions {
  double eps = 1e-5;
  bool elementwise_affine = true;
  bool bias = true;
  DType dtype = DType::Float32;
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5, DType dtype = DType::Float32);
  LayerNorm(int64_t dim, const LayerNormOptions& options);
  Tensor forward(const Tensor& x);
  Tensor weight;  // ones, or undefined without elementwise_affine
  Tensor bias;    // zeros, or undefined without elementwise_affine or bias
  double eps;
};

// x / sqrt(mean(x^2 over the last dim) + eps) * weight, as LLaMA's (and torch.nn.RMSNorm's).
class RMSNorm : public Module {
 public:
  explicit RMSNorm(int64_t dim, double eps = 1e-6, DType dtype = DType::Float32);
  Tensor forward(const Tensor& x);
  Tensor weight;  // ones
  double eps;
};

// Draws from `generator`, or from the default generator when it is null (so that its
// randomness is part of the saved RNG state). Tensor-parallel models point the dropouts on
// activations that differ across ranks at a per-rank generator (parallel/rng_tracker.h).
class Dropout : public Module {
 public:
  explicit Dropout(double probability, Generator* generator = nullptr) : p(probability), generator(generator) {}
  Tensor forward(const Tensor& x);
  double p;
  Generator* generator;  // not owned; must outlive this module's forwards
};

}  // namespace strata::nn
