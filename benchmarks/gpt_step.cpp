// One GPT training step (forward, backward, AdamW) on CPU: the model of the core benchmark
// (vocab 256, context 128, 4 layers, width 256, 4 heads, batch 8). Prints the median step
// time, the achieved GFLOP/s and the rate of a 1024^3 float32 matmul through strata's GEMM
// backend (strata::gemm_backend()) measured in the same process at the same thread count
// (the practical ceiling). benchmarks/run_gpt_step.sh runs it beside PyTorch and prints the
// ratios.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_util.h"
#include "strata/strata.h"

using namespace strata;
using Clock = std::chrono::steady_clock;
using bench::median;

namespace {

// float32 matmul GFLOP/s on an n x n x n product, median of `reps`.
double sgemm_rate(int64_t n, int reps) {
  NoGradGuard no_grad;
  Tensor a = full({n, n}, 0.5), b = full({n, n}, 0.25);
  std::vector<double> rates;
  for (int r = 0; r < reps + 1; ++r) {
    auto t0 = Clock::now();
    Tensor c = matmul(a, b);
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (r > 0) rates.push_back(2.0 * double(n * n * n) / s / 1e9);
  }
  return median(rates);
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 20, warmup = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--steps") steps = std::atoi(argv[i + 1]);
    if (k == "--warmup") warmup = std::atoi(argv[i + 1]);
  }
  const int64_t B = 8, T = 128;
  nn::GPTConfig config{.vocab_size = 256, .context = 128, .n_layer = 4, .n_head = 4, .n_embd = 256, .seed = 0};
  nn::GPT model(config);
  optim::AdamW optimizer(model.parameters(), {.lr = 3e-4, .weight_decay = 0.1});
  Generator gen(0);
  Tensor tokens = randint(0, 256, {B, T}, {.dtype = DType::Int64}, &gen);
  Tensor targets = randint(0, 256, {B, T}, {.dtype = DType::Int64}, &gen);

  std::vector<double> times;
  double last_loss = 0;
  for (int i = 0; i < warmup + steps; ++i) {
    auto t0 = Clock::now();
    Tensor loss = model.loss(tokens, targets);
    optimizer.zero_grad(/*set_to_none=*/true);  // as the PyTorch peer does
    loss.backward();
    optimizer.step();
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    last_loss = loss.item();
    if (i >= warmup) times.push_back(ms);
  }
  const double ms = median(times);
  const double flops = model.flops_per_step(B, T);
  const double gemm = sgemm_rate(1024, 15);
  AllocatorStats stats = cpu_allocator::stats();
  std::printf("strata_ms_median=%.2f threads=%d gflop_per_step=%.2f gflops=%.1f sgemm_gflops=%.1f loss=%.4f "
              "system_allocs=%llu gemm_backend=%s\n",
              ms, omp_get_max_threads(), flops / 1e9, flops / (ms * 1e6), gemm, last_loss,
              static_cast<unsigned long long>(stats.system_allocs), gemm_backend());
  return 0;
}
