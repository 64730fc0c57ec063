// One LLaMA training step (forward, backward, AdamW) on CPU: nn::Llama with LlamaConfig's
// defaults (vocab 256, context 128, 4 layers, width 256, 4 query and 2 key/value heads,
// SwiGLU width 688, untied head), batch 8. Prints the median step time and rates
// (model_step.h); benchmarks/run_llama_step.sh runs it beside PyTorch
// (benchmarks/llama_step_torch.py, the same model in plain torch ops).
#include "model_step.h"

using namespace strata;

int main(int argc, char** argv) {
  const bench::StepOptions options = bench::parse_step_options(argc, argv);
  const int64_t B = 8, T = 128;
  nn::Llama model({.vocab_size = 256,
                   .context = 128,
                   .n_layer = 4,
                   .n_head = 4,
                   .n_kv_head = 2,
                   .n_embd = 256,
                   .intermediate_size = 688,
                   .seed = 0});
  bench::run_step_benchmark(model, model.flops_per_step(B, T), B, T, options);
  return 0;
}
