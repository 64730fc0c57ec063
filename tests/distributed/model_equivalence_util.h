#pragma once
// Training a small GPT or Llama in one process as the reference that a parallel run
// (tensor, pipeline, 3D) must equal: the models, the global batches, AdamW, and the
// comparison of final weights with float32 rounding-noise entries left out.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "float32_bound.h"
#include "strata/strata.h"

namespace strata {

enum class Family { Gpt, Llama };
inline const char* name_of(Family f) { return f == Family::Gpt ? "gpt" : "llama"; }

inline constexpr int64_t kVocab = 15;  // divides by neither 2 nor 4: the vocabulary parts are padded
inline constexpr int64_t kSeq = 8;
inline constexpr int64_t kLayers = 2;
inline constexpr int kSteps = 5;

inline nn::GPTConfig gpt_config(DType dtype, int64_t layers = kLayers) {
  return {
      .vocab_size = kVocab, .context = kSeq, .n_layer = layers, .n_head = 4, .n_embd = 16, .seed = 3, .dtype = dtype};
}
inline nn::LlamaConfig llama_config(DType dtype, int64_t layers = kLayers) {
  return {.vocab_size = kVocab,
          .context = kSeq,
          .n_layer = layers,
          .n_head = 8,
          .n_kv_head = 4,
          .n_embd = 32,
          .intermediate_size = 24,
          .seed = 3,
          .dtype = dtype};
}
inline nn::ParameterCounts counts_of(Family f, int64_t layers = kLayers) {
  return f == Family::Gpt ? nn::parameter_counts(gpt_config(DType::Float32, layers))
                          : nn::parameter_counts(llama_config(DType::Float32, layers));
}

// The model (or, with `part`, a pipeline stage of it) of `layers` blocks.
inline std::unique_ptr<nn::CausalLM> build(Family f, DType dtype, std::shared_ptr<nn::LayerFactory> factory = nullptr,
                                           nn::ModelPart part = {}, int64_t layers = kLayers) {
  if (f == Family::Gpt) return std::make_unique<nn::GPT>(gpt_config(dtype, layers), factory, std::move(part));
  return std::make_unique<nn::Llama>(llama_config(dtype, layers), factory, std::move(part));
}

// Global batch of step s: [rows, kSeq] tokens and targets, one ignored target per row (so
// that every data-parallel slice counts as many targets and the mean of their means is the
// global mean).
inline std::pair<Tensor, Tensor> batch(int s, int64_t rows) {
  Generator gen(99, static_cast<uint64_t>(s) * 7919);
  Tensor tokens = randint(0, kVocab, {rows, kSeq}, {.dtype = DType::Int64}, &gen);
  Tensor targets = randint(0, kVocab, {rows, kSeq}, {.dtype = DType::Int64}, &gen);
  for (int64_t r = 0; r < rows; ++r) targets.data<int64_t>()[r * kSeq + s % kSeq] = -100;
  return {tokens, targets};
}

inline optim::AdamWOptions adamw() { return {.lr = 1e-3, .weight_decay = 0.1}; }

// Entries whose single-process gradient is at rounding-noise level at some step
// (|g| <= 1e-5 max|g| of its tensor), by parameter name: the rule of the DDP tests
// (ddp_test_util.h). GPT's key bias has an exactly zero gradient in exact arithmetic
// (softmax ignores a shift common to every key), so float32 sees only rounding noise there,
// which AdamW's division by sqrt(v) turns into full steps of arbitrary sign.
using NoiseMask = std::map<std::string, std::vector<bool>>;

inline void mark_noise(const nn::Module& model, NoiseMask& mask) {
  for (const auto& [name, p] : model.named_parameters()) {
    std::vector<double> g = p.grad().to_vector<double>();
    std::vector<bool>& m = mask[name];
    m.resize(g.size(), false);
    double gmax = 0;
    for (double x : g) gmax = std::max(gmax, std::fabs(x));
    for (size_t k = 0; k < g.size(); ++k) m[k] = m[k] || std::fabs(g[k]) <= 1e-5 * gmax;
  }
}

struct Reference {
  std::vector<double> losses = {};
  StateDict weights = {};
  NoiseMask noise = {};
};

// One process training `model` for kSteps AdamW steps on batch_of(step, rows): losses, final
// weights and the entries at rounding-noise level.
template <class BatchOf>
Reference train_model(nn::CausalLM& model, int64_t rows, BatchOf&& batch_of) {
  optim::AdamW opt(model.parameters(), adamw());
  Reference ref;
  for (int s = 0; s < kSteps; ++s) {
    auto [x, y] = batch_of(s, rows);
    opt.zero_grad();
    Tensor loss = model.loss(x, y);
    loss.backward();
    mark_noise(model, ref.noise);
    opt.step();
    ref.losses.push_back(loss.item());
  }
  ref.weights = model.state_dict();
  return ref;
}

// One process on the whole global batch.
inline Reference train_single(Family f, DType dtype, int64_t rows, int64_t layers = kLayers) {
  return train_model(*build(f, dtype, nullptr, {}, layers), rows, batch);
}

// The worst max|a - b| / max|b| over the tensors of `got` (all of the reference's, or a
// pipeline stage's), leaving out float32 entries at noise level (float64 keeps every entry);
// `where` names the tensor.
inline double worst_difference(const StateDict& got, const Reference& ref, DType dtype, std::string& where) {
  double worst = 0;
  int64_t excluded = 0;
  for (const auto& [name, g] : got) {
    STRATA_CHECK(ref.weights.count(name) != 0, "worst_difference: '", name, "' is not in the reference");
    const Tensor& w = ref.weights.at(name);
    std::vector<double> a = g.to_vector<double>(), b = w.to_vector<double>();
    const std::vector<bool>* noise = ref.noise.count(name) != 0 ? &ref.noise.at(name) : nullptr;
    double diff = 0, scale = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      scale = std::max(scale, std::fabs(b[i]));
      if (dtype == DType::Float32 && noise != nullptr && (*noise)[i]) {
        ++excluded;
        continue;
      }
      diff = std::max(diff, std::fabs(a[i] - b[i]));
    }
    const double rel = diff / std::max(scale, 1e-300);
    if (rel > worst) {
      worst = rel;
      where = name;
    }
  }
  where += " (" + std::to_string(excluded) + " noise entries left out)";
  return worst;
}

// The float32 rounding error of one process's training (train_single), against its float64
// run (same initial values up to rounding): `weights` in worst_difference's metric with the
// float32 run's noise entries left out, `loss` the largest relative difference of a step's
// loss. Computed once per (family, rows, layers) on every rank; the bounds of float32 parallel
// runs against the float32 reference derive from it (float32_bound.h).
struct Float32Error {
  double weights = 0;
  double loss = 0;
};
inline Float32Error float32_training_error(Family f, int64_t rows, int64_t layers = kLayers) {
  static std::map<std::tuple<Family, int64_t, int64_t>, Float32Error> cache;
  const auto key = std::make_tuple(f, rows, layers);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  const Reference r32 = train_single(f, DType::Float32, rows, layers);
  const Reference r64 = train_single(f, DType::Float64, rows, layers);
  Float32Error e;
  std::string where;
  e.weights = worst_difference(r32.weights, {.weights = r64.weights, .noise = r32.noise}, DType::Float32, where);
  for (size_t s = 0; s < r64.losses.size(); ++s)
    e.loss = std::max(e.loss, std::fabs(r32.losses[s] - r64.losses[s]) / std::fabs(r64.losses[s]));
  return cache[key] = e;
}

// Float64: the algorithm itself (measured up to ~1e-12). Float32: derived from the reference's
// own float32 error (float32_bound.h), not a fixed number that depends on the CPU's kernels.
inline double tolerance(DType dtype, Family f, int64_t rows, int64_t layers = kLayers) {
  return dtype == DType::Float64 ? 1e-11 : test::float32_bound(float32_training_error(f, rows, layers).weights);
}
inline double tolerance(DType dtype) {
  STRATA_CHECK(dtype == DType::Float64,
               "tolerance: a float32 bound derives from the float64 run "
               "(tolerance(dtype, family, rows))");
  return 1e-11;
}

}  // namespace strata
