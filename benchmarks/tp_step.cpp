// Tensor parallelism on a GPT wide enough for it to matter (width 768, 12 heads, 2 blocks,
// context 128, vocab 1024, batch 4; AdamW), one training step = forward, backward, AdamW.
//
// Alone (world size 1) it runs the single-process model; under mpirun -np N it runs the
// same model tensor-parallel over the N ranks, without and then with sequence parallelism.
// Each rank prints per mode: its parameter bytes, its activation bytes (the allocator's peak
// in use during forward + backward above what was in use before: activations, the autograd
// graph's saved tensors and temporaries; parameters and gradients excluded) and the median
// step time (the larger of the ranks' times; the ranks meet at an untimed barrier first).
// benchmarks/run_tp_step.sh runs both and prints the speed-up against the ideal.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_util.h"
#include "strata/distributed/init.h"
#include "strata/strata.h"

using namespace strata;
using bench::median;

namespace {

constexpr int kSteps = 6;  // timed, after one warm-up step

nn::GPTConfig config() {
  return {.vocab_size = 1024, .context = 128, .n_layer = 2, .n_head = 12, .n_embd = 768, .dropout = 0.0, .seed = 5};
}

struct Figures {
  int64_t param_bytes = 0;
  int64_t activation_bytes = 0;
  double step_ms = 0;
};

Figures run(dist::ProcessGroup& world, std::shared_ptr<nn::LayerFactory> factory) {
  nn::GPT model(config(), factory);
  optim::AdamW opt(model.parameters(), {.lr = 1e-4});
  Generator gen(7);
  Tensor x = randint(0, config().vocab_size, {4, config().context}, {.dtype = DType::Int64}, &gen);
  Tensor y = randint(0, config().vocab_size, {4, config().context}, {.dtype = DType::Int64}, &gen);
  Figures f;
  for (const Tensor& p : model.parameters()) f.param_bytes += static_cast<int64_t>(p.nbytes());
  std::vector<double> times;
  for (int s = 0; s <= kSteps; ++s) {
    world.barrier()->wait();
    opt.zero_grad();  // keeps the gradient tensors: they are not counted as activations
    const size_t before = cpu_allocator::stats().in_use_bytes;
    cpu_allocator::reset_peak();
    const auto t0 = bench::Clock::now();
    model.loss(x, y).backward();
    const size_t peak = cpu_allocator::stats().peak_in_use_bytes;
    opt.step();
    Tensor ms = full({1}, bench::ms_since(t0), {.dtype = DType::Float64});
    world.all_reduce(ms, dist::ReduceOp::Max)->wait();
    if (s > 0) times.push_back(ms.item());
    f.activation_bytes = std::max<int64_t>(f.activation_bytes, static_cast<int64_t>(peak - before));
  }
  f.step_ms = median(times);
  return f;
}

void print(dist::ProcessGroup& world, const char* mode, const Figures& f) {
  if (world.rank() != 0) return;
  std::printf("mode=%s ranks=%d param_mb=%.2f activation_mb=%.2f step_ms=%.1f\n", mode, world.size(),
              static_cast<double>(f.param_bytes) / 1e6, static_cast<double>(f.activation_bytes) / 1e6, f.step_ms);
}

}  // namespace

int main() {
  auto& world = dist::init();
  if (world.size() == 1) {
    print(world, "single", run(world, nullptr));
  } else {
    print(world, "tp", run(world, std::make_shared<parallel::TensorParallelFactory>(world)));
    print(world, "tp_sp",
          run(world, std::make_shared<parallel::TensorParallelFactory>(world, parallel::TensorParallelOptions{true})));
  }
  dist::finalize();
  return 0;
}
