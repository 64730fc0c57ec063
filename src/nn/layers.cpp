#include "strata/nn/layers.h"

#include <cmath>
#include <typeinfo>
#include <utility>

#include "strata/ops.h"
#include "strata/tensor/factory.h"

namespace strata::nn {
namespace {
bool is_16bit(DType d) { return d == DType::BFloat16 || d == DType::Float16; }

// The table as a "part" of itself that lacks row `skip`: fill_init leaves a row in no run at
// zero and draws every other row at its own index, so the padding row starts at zero while
// the rest hold what they would without padding (now or when drawn by name later).
PartOfWhole all_rows_but(int64_t skip, int64_t rows, int64_t dim) {
  return {.whole = {rows, dim},
          .dim = 0,
          .runs = {{.local_start = 0, .whole_start = 0, .length = skip},
                   {.local_start = skip + 1, .whole_start = skip + 1, .length = rows - skip - 1}}};
}

}  // namespace

DType compute_dtype(DType param_dtype) { return is_16bit(param_dtype) ? DType::Float32 : param_dtype; }

Tensor compute_param(const Tensor& param) {
  if (!param.defined() || !is_16bit(param.dtype())) return param;
  return param.to(DType::Float32);
}

ParamInit linear_weight_init(int64_t in_features, const InitOptions& init) {
  if (init.linear_init == LinearInit::Normal) return {.kind = ParamInit::Kind::Normal, .scale = init.std};
  return {.kind = ParamInit::Kind::Uniform, .scale = 1.0 / std::sqrt(static_cast<double>(in_features))};
}

ParamInit linear_bias_init(int64_t in_features, const InitOptions& init) {
  if (init.linear_init == LinearInit::Normal) return {.kind = ParamInit::Kind::Constant, .scale = 0.0};
  return linear_weight_init(in_features, init);
}

InitialValue initial_value(const Shape& shape, ParamInit how, const InitOptions& init,
                           std::optional<PartOfWhole> part) {
  InitialValue out{.value = zeros(shape, {.dtype = init.dtype}), .recipe = {.init = how, .part = std::move(part)}};
  // Constants take no subsequence (as zeros() and ones() never did); draws take one each.
  if (!init.by_name && how.kind != ParamInit::Kind::Constant) {
    Generator& gen = init.gen != nullptr ? *init.gen : default_generator();
    fill_init(out.value, how, gen.next_stream(), out.recipe.part ? &*out.recipe.part : nullptr);
  } else if (!init.by_name) {
    fill_init(out.value, how, {}, nullptr);
  }
  return out;
}

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias, InitOptions init) {
  STRATA_CHECK(in_features > 0 && out_features > 0, "Linear: invalid sizes in=", in_features, " out=", out_features);
  InitialValue w = initial_value({out_features, in_features}, linear_weight_init(in_features, init), init);
  weight = register_parameter("weight", w.value, init.by_name ? std::optional(w.recipe) : std::nullopt);
  if (!with_bias) return;
  InitialValue b = initial_value({out_features}, linear_bias_init(in_features, init), init);
  bias = register_parameter("bias", b.value, init.by_name ? std::optional(b.recipe) : std::nullopt);
}

Linear::Linear(InitialValue w, InitialValue b, bool by_name) {
  weight = register_parameter("weight", w.value, by_name ? std::optional(w.recipe) : std::nullopt);
  if (b.value.defined()) bias = register_parameter("bias", b.value, by_name ? std::optional(b.recipe) : std::nullopt);
}

Tensor Linear::forward(const Tensor& x) {
  auto hooks = forward_hooks();
  return linear(x, weight, bias);  // 16-bit parameters: the ops compute in float32
}

bool Linear::is_local_product() const { return typeid(*this) == typeid(Linear); }

Embedding::Embedding(int64_t num_embeddings, int64_t dim, InitOptions init, std::optional<int64_t> padding)
    : padding_idx(padding) {
  STRATA_CHECK(num_embeddings > 0 && dim > 0, "Embedding: invalid sizes ", num_embeddings, "x", dim);
  STRATA_CHECK(!padding || (*padding >= -num_embeddings && *padding < num_embeddings), "Embedding: padding_idx ",
               padding.value_or(0), " is outside [-", num_embeddings, ", ", num_embeddings, ") for ", num_embeddings,
               " embeddings");
  if (padding_idx) padding_idx = (*padding_idx + num_embeddings) % num_embeddings;
  InitialValue w =
      initial_value({num_embeddings, dim}, {.kind = ParamInit::Kind::Normal, .scale = init.std}, init,
                    padding_idx ? std::optional(all_rows_but(*padding_idx, num_embeddings, dim)) : std::nullopt);
  weight = register_parameter("weight", w.value, init.by_name ? std::optional(w.recipe) : std::nullopt);
}

Embedding::Embedding(InitialValue w, bool by_name) {
  weight = register_parameter("weight", w.value, by_name ? std::optional(w.recipe) : std::nullopt);
}

Tensor Embedding::forward(const Tensor& indices) {
  auto hooks = forward_hooks();
  return embedding(indices, weight, padding_idx);
}

LayerNorm::LayerNorm(int64_t dim, double eps_, DType dtype) : LayerNorm(dim, {.eps = eps_, .dtype = dtype}) {}

LayerNorm::LayerNorm(int64_t dim, const LayerNormOptions& options) : eps(options.eps) {
  STRATA_CHECK(dim > 0, "LayerNorm: invalid size ", dim);
  if (!options.elementwise_affine) return;
  weight = register_parameter("weight", ones({dim}, {.dtype = options.dtype}));
  if (options.bias) bias = register_parameter("bias", zeros({dim}, {.dtype = options.dtype}));
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
