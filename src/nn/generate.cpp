#include "strata/nn/generate.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <vector>

#include "strata/autograd/grad_mode.h"
#include "strata/core/random.h"
#include "strata/ops.h"
#include "strata/tensor/factory.h"

namespace strata::nn {
namespace {

void check_options(const GenerateOptions& o) {
  if (o.greedy) return;
  STRATA_CHECK(o.temperature > 0.0 && std::isfinite(o.temperature), "generate: temperature must be positive, got ",
               o.temperature, " (use greedy for argmax)");
  STRATA_CHECK(o.top_k >= 0, "generate: top_k must be >= 0 (0 keeps every token), got ", o.top_k);
  STRATA_CHECK(o.top_p > 0.0 && o.top_p <= 1.0, "generate: top_p must be in (0, 1], got ", o.top_p);
}

// A uniform double in [0, 1) from 53 random bits.
double uniform_double(Generator& gen) { return static_cast<double>(gen.random_u64() >> 11) * 0x1.0p-53; }

// Restores the model's training mode on every exit path.
class EvalScope {
 public:
  explicit EvalScope(Module& m) : module_(m), was_training_(m.is_training()) { m.eval(); }
  ~EvalScope() { module_.train(was_training_); }
  EvalScope(const EvalScope&) = delete;
  EvalScope& operator=(const EvalScope&) = delete;

 private:
  Module& module_;
  bool was_training_;
};

}  // namespace

int64_t select_token(const double* logits, int64_t vocab, const GenerateOptions& options, double u) {
  if (options.greedy) return std::max_element(logits, logits + vocab) - logits;
  const double neg_inf = -std::numeric_limits<double>::infinity();
  std::vector<double> l(logits, logits + vocab);
  for (double& x : l) x /= options.temperature;
  if (options.top_k > 0 && options.top_k < vocab) {
    std::vector<double> sorted = l;
    std::nth_element(sorted.begin(), sorted.begin() + (options.top_k - 1), sorted.end(), std::greater<>());
    const double kth = sorted[static_cast<size_t>(options.top_k - 1)];
    for (double& x : l) x = x < kth ? neg_inf : x;
  }
  // Softmax over what is left.
  const double top = *std::max_element(l.begin(), l.end());
  std::vector<double> p(l.size());
  double total = 0.0;
  for (size_t i = 0; i < l.size(); ++i) total += p[i] = std::exp(l[i] - top);
  for (double& x : p) x /= total;
  if (options.top_p < 1.0) {
    // Keep tokens in order of probability while the mass before each is below top_p (the
    // most likely is always kept); renormalise.
    std::vector<int64_t> order(p.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    double mass = 0.0, kept = 0.0;
    for (int64_t i : order) {
      if (mass >= options.top_p) {
        p[i] = 0.0;
      } else {
        mass += p[i];
        kept += p[i];
      }
    }
    for (double& x : p) x /= kept;
  }
  double cumulative = 0.0;
  int64_t last_possible = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    if (p[i] <= 0.0) continue;
    last_possible = i;
    cumulative += p[i];
    if (u < cumulative) return i;
  }
  return last_possible;  // u beyond the rounded total
}

Tensor generate(LanguageModel& model, const Tensor& prompt, int64_t max_new_tokens, const GenerateOptions& options) {
  STRATA_CHECK(prompt.dim() == 2 && prompt.size(1) >= 1 && prompt.dtype() == DType::Int64,
               "generate: prompt must be int64 [batch, time] with time >= 1, got ", prompt.dtype(), " of shape ",
               prompt.shape());
  STRATA_CHECK(max_new_tokens >= 0, "generate: max_new_tokens must be >= 0, got ", max_new_tokens);
  const int64_t B = prompt.size(0), T0 = prompt.size(1), V = model.vocab_size();
  STRATA_CHECK(T0 + max_new_tokens <= model.context_length(), "generate: prompt length ", T0, " + max_new_tokens ",
               max_new_tokens, " = ", T0 + max_new_tokens, " exceeds the model's context of ", model.context_length());
  check_options(options);
  NoGradGuard no_grad;
  EvalScope eval(model);
  Generator gen(options.seed);

  // The tokens stay on the host; each step's input goes to the model's device (its
  // parameters') and its last logits, one [B, V] row set, come back for select_token: the
  // CPU's selection for a model on any device.
  const std::vector<Tensor> params = model.parameters();
  const Device device = params.empty() ? Device::cpu() : params.front().device();
  Tensor out = zeros({B, T0 + max_new_tokens}, {.dtype = DType::Int64});
  out.narrow(1, 0, T0).copy_(prompt.to(Device::cpu()));
  const bool cached = options.use_cache && model.cache_layers() > 0;
  std::optional<KVCache> cache;
  if (cached) cache.emplace(model.make_cache());
  for (int64_t t = T0; t < T0 + max_new_tokens; ++t) {
    // With the cache, only the tokens not yet seen (the prompt, then the newest) go in.
    Tensor input =
        cached ? out.narrow(1, cache->length(), t - cache->length()).contiguous() : out.narrow(1, 0, t).contiguous();
    Tensor logits = model.forward(input.to(device), cached ? &*cache : nullptr);
    STRATA_CHECK(logits.dim() == 3 && logits.size(0) == B && logits.size(1) == input.size(1) && logits.size(2) == V,
                 "generate: the model's forward returned logits of shape ", logits.shape(), " for tokens of shape ",
                 input.shape(), "; expected [", B, ", ", input.size(1), ", ", V, "] (vocab_size() ", V, ")");
    // [B, V] on the host
    Tensor last = logits.select(1, logits.size(1) - 1).to(DType::Float64).to(Device::cpu()).contiguous();
    const double* rows = last.data<double>();
    for (int64_t b = 0; b < B; ++b) {
      const double u = options.greedy ? 0.0 : uniform_double(gen);
      out.data<int64_t>()[b * out.size(1) + t] = select_token(rows + b * V, V, options, u);
    }
  }
  return out.to(prompt.device());
}

}  // namespace strata::nn
