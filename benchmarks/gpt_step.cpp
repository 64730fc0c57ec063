// One GPT training step (forward, backward, AdamW) on CPU: the model of the core benchmark
// (vocab 256, context 128, 4 layers, width 256, 4 heads, batch 8). Prints the median step
// time and rates (model_step.h); benchmarks/run_gpt_step.sh runs it beside PyTorch.
#include "model_step.h"

using namespace strata;

int main(int argc, char** argv) {
  const bench::StepOptions options = bench::parse_step_options(argc, argv);
  const int64_t B = 8, T = 128;
  nn::GPT model({.vocab_size = 256, .context = 128, .n_layer = 4, .n_head = 4, .n_embd = 256, .seed = 0});
  bench::run_step_benchmark(model, model.flops_per_step(B, T), B, T, options);
  return 0;
}
