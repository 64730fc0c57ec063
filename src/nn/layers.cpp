#include "strata/nn/layers.h"

#include <cmath>
#include <utility>

#include "strata/tensor/factory.h"
#include "strata/ops.h"

namespace strata::nn {
namespace {
bool is_16bit(DType d) { return d == DType::BFloat16 || d == DType::Float16; }

Tensor normal_init(const Shape& shape, const InitOptions& init) {
  const DType draw = compute_dtype(init.dtype);
  Tensor t = randn(shape, {.dtype = draw}, init.gen);
  mul_(t, init.std);
  return draw == init.dtype ? t : t.to(init.dtype);
}

// uniform(-bound, bound), drawn like normal_init (in float32 for 16-bit parameters).
Tensor uniform_init(const Shape& shape, double bound, const InitOptions& init) {
  const DType draw = compute_dtype(init.dtype);
  Tensor t = add(mul(rand(shape, {.dtype = draw}, init.gen), 2.0 * bound), -bound);
  return draw == init.dtype ? t : t.to(init.dtype);
}
}  // namespace

DType compute_dtype(DType param_dtype) { return is_16bit(param_dtype) ? DType::Float32 : param_dtype; }

Tensor compute_param(const Tensor& param) {
  if (!param.defined() || !is_16bit(param.dtype())) return param;
  return param.to(DType::Float32);
}

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias, InitOptions init) {
  STRATA_CHECK(in_features > 0 && out_features > 0, "Linear: invalid sizes in=", in_features, " out=", out_features);
  if (init.linear_init == LinearInit::Normal) {
    weight = register_parameter("weight", normal_init({out_features, in_features}, init));
    if (with_bias) bias = register_parameter("bias", zeros({out_features}, {.dtype = init.dtype}));
    return;
  }
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  weight = register_parameter("weight", uniform_init({out_features, in_features}, bound, init));
  if (with_bias) bias = register_parameter("bias", uniform_init({out_features}, bound, init));
}

Linear::Linear(Tensor w, Tensor b) {
  weight = register_parameter("weight", std::move(w));
  if (b.defined()) bias = register_parameter("bias", std::move(b));
}

Tensor Linear::forward(const Tensor& x) {
  auto hooks = forward_hooks();
  return linear(x, weight, bias);  // 16-bit parameters: the ops compute in float32
}

Embedding::Embedding(int64_t num_embeddings, int64_t dim, InitOptions init) {
  STRATA_CHECK(num_embeddings > 0 && dim > 0, "Embedding: invalid sizes ", num_embeddings, "x", dim);
  weight = register_parameter("weight", normal_init({num_embeddings, dim}, init));
}

Embedding::Embedding(Tensor w) { weight = register_parameter("weight", std::move(w)); }

Tensor Embedding::forward(const Tensor& indices) {
  auto hooks = forward_hooks();
  return embedding(indices, weight);
}

LayerNorm::LayerNorm(int64_t dim, double eps_, DType dtype) : eps(eps_) {
  STRATA_CHECK(dim > 0, "LayerNorm: invalid size ", dim);
  weight = register_parameter("weight", ones({dim}, {.dtype = dtype}));
  bias = register_parameter("bias", zeros({dim}, {.dtype = dtype}));
}

Tensor LayerNorm::forward(const Tensor& x) {
  auto hooks = forward_hooks();
  return layer_norm(x, weight, bias, eps);
}

RMSNorm::RMSNorm(int64_t dim, double eps_, DType dtype) : eps(eps_) {
  STRATA_CHECK(dim > 0, "RMSNorm: invalid size ", dim);
  STRATA_CHECK(eps_ > 0.0, "RMSNorm: eps must be positive, got ", eps_);
  weight = register_parameter("weight", ones({dim}, {.dtype = dtype}));
}

Tensor RMSNorm::forward(const Tensor& x) {
  auto hooks = forward_hooks();
  return rms_norm(x, weight, eps);
}

Tensor Dropout::forward(const Tensor& x) { return dropout(x, p, is_training(), generator); }

}  // namespace strata::nn
