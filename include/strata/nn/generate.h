#pragma once
// Autoregressive sampling from an nn::LanguageModel (GPT, Llama, or a model of your own),
// with a key/value cache where the model keeps one.
#include <cstdint>

#include "strata/nn/language_model.h"

namespace strata::nn {

struct GenerateOptions {
  // Take the most likely token (the lowest id among equals); temperature, top_k, top_p and
  // seed are then unused.
  bool greedy = false;
  double temperature = 1.0;  // > 0; divides the logits before top_k/top_p and the softmax
  int64_t top_k = 0;         // keep the k most likely tokens (and any tied with the k-th); 0: all
  double top_p = 1.0;        // keep the most likely tokens until their probability reaches top_p, in (0, 1]
  uint64_t seed = 0;         // the sampling stream: one draw per row and new token
  // Run each new token alone through the model, attending to cached keys and values, instead
  // of the whole sequence again. Both give the same tokens (exactly, in float64). Unused for
  // a model without a cache (LanguageModel::cache_layers() 0).
  bool use_cache = true;
};

// prompt int64 [B, T0] (T0 >= 1) -> int64 [B, T0 + max_new_tokens]: the prompt followed by
// the sampled tokens. Runs with grad mode off and the model in eval mode (restored after).
// T0 + max_new_tokens must fit the model's context. The model may sit on any device (a CUDA
// model runs there); the tokens are selected on the host from float64 logits, and the result
// is on the prompt's device. Under ZeRO-3 or tensor parallelism every rank of the group calls
// it with the same prompt and options (each forward is collective).
Tensor generate(LanguageModel& model, const Tensor& prompt, int64_t max_new_tokens,
                const GenerateOptions& options = {});

// The token one row of logits selects under `options` (greedy, or filtered and sampled with
// the uniform draw u in [0, 1)). Exposed for tests.
int64_t select_token(const double* logits, int64_t vocab, const GenerateOptions& options, double u);

}  // namespace strata::nn
