#pragma once
// The training-step benchmark shared by gpt_step.cpp and llama_step.cpp: times forward,
// backward and AdamW on a decoder (random tokens, batch x seq), and prints one line with the
// median step, the achieved GFLOP/s and the rate of a 1024^3 float32 matmul through strata's
// GEMM backend (strata::gemm_backend()) in the same process and thread count, the practical
// ceiling. benchmarks/run_{gpt,llama}_step.sh run it beside the PyTorch peers.
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_util.h"
#include "strata/strata.h"

namespace strata::bench {

struct StepOptions {
  int steps = 20, warmup = 3;
};

// --steps N --warmup N.
inline StepOptions parse_step_options(int argc, char** argv) {
  StepOptions o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--steps") o.steps = std::atoi(argv[i + 1]);
    if (k == "--warmup") o.warmup = std::atoi(argv[i + 1]);
  }
  return o;
}

// float32 matmul GFLOP/s on an n x n x n product, median of `reps`.
inline double sgemm_rate(int64_t n, int reps) {
  NoGradGuard no_grad;
  Tensor a = full({n, n}, 0.5), b = full({n, n}, 0.25);
  std::vector<double> rates;
  for (int r = 0; r < reps + 1; ++r) {
    const auto t0 = Clock::now();
    Tensor c = matmul(a, b);
    if (r > 0) rates.push_back(2.0 * double(n * n * n) / (ms_since(t0) * 1e6));
  }
  return median(rates);
}

// Times `o.warmup + o.steps` steps (loss, zero_grad to none as the PyTorch peers do,
// backward, AdamW) and prints `strata_ms_median=... threads=... gflop_per_step=...
// gflops=... sgemm_gflops=... loss=... system_allocs=... gemm_backend=...`.
inline void run_step_benchmark(nn::CausalLM& model, double flops_per_step, int64_t batch, int64_t seq,
                               const StepOptions& o) {
  optim::AdamW optimizer(model.parameters(), {.lr = 3e-4, .weight_decay = 0.1});
  Generator gen(0);
  Tensor tokens = randint(0, model.vocab_size(), {batch, seq}, {.dtype = DType::Int64}, &gen);
  Tensor targets = randint(0, model.vocab_size(), {batch, seq}, {.dtype = DType::Int64}, &gen);
  std::vector<double> times;
  double last_loss = 0;
  for (int i = 0; i < o.warmup + o.steps; ++i) {
    const auto t0 = Clock::now();
    Tensor loss = model.loss(tokens, targets);
    optimizer.zero_grad(/*set_to_none=*/true);
    loss.backward();
    optimizer.step();
    const double ms = ms_since(t0);
    last_loss = loss.item();
    if (i >= o.warmup) times.push_back(ms);
  }
  const double ms = median(times);
  const double gemm = sgemm_rate(1024, 15);
  const AllocatorStats stats = cpu_allocator::stats();
  std::printf(
      "strata_ms_median=%.2f threads=%d gflop_per_step=%.2f gflops=%.1f sgemm_gflops=%.1f loss=%.4f "
      "system_allocs=%llu gemm_backend=%s\n",
      ms, omp_get_max_threads(), flops_per_step / 1e9, flops_per_step / (ms * 1e6), gemm, last_loss,
      static_cast<unsigned long long>(stats.system_allocs), gemm_backend());
}

}  // namespace strata::bench
