#include "train_llama/pipeline_generate.h"

#include <vector>

#include "strata/autograd/grad_mode.h"
#include "strata/core/random.h"
#include "strata/tensor/factory.h"

namespace strata::examples {

Tensor generate_through(parallel::Pipeline& pipeline, const Tensor& prompt, int64_t new_tokens,
                        const nn::GenerateOptions& options) {
  NoGradGuard no_grad;
  std::vector<int64_t> tokens = prompt.to_vector<int64_t>();
  Generator gen(options.seed);
  for (int64_t i = 0; i < new_tokens; ++i) {
    const auto length = static_cast<int64_t>(tokens.size());
    const Tensor logits = pipeline.forward_logits(from_vector(tokens, {1, length}));
    const int64_t vocab = logits.size(-1);
    const std::vector<double> last =
        logits.narrow(1, length - 1, 1).reshape({vocab}).to(DType::Float64).to_vector<double>();
    // A uniform double in [0, 1) from 53 random bits, as nn::generate draws it.
    const double u = options.greedy ? 0.0 : static_cast<double>(gen.random_u64() >> 11) * 0x1.0p-53;
    tokens.push_back(nn::select_token(last.data(), vocab, options, u));
  }
  return from_vector(tokens, {1, static_cast<int64_t>(tokens.size())});
}

}  // namespace strata::examples
