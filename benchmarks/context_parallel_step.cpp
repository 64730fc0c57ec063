// Context parallelism on a LLaMA at a long sequence: one training step (forward, backward with
// the gradients averaged over the context ranks by DDP, AdamW) of one sequence of --seq tokens
// split over all ranks (CP = world size, 1 under one process), so that every CP degree trains
// on the same global tokens. Prints, on rank 0, the median step (the slowest rank's), the
// activation bytes this rank holds at the end of forward (the allocator's in-use bytes over
// those at the step's start, gradients released), its peak during the step, and the ring's
// bytes sent per step. benchmarks/run_context_parallel_step.sh runs CP 1, 2 and 4 and prints
// the table with the ratios to CP 1.
//   mpirun -np N bench_context_parallel_step [--seq 4096] [--steps 5] [--warmup 1] [--attention ring|all-gather]
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "dist_bench_util.h"
#include "strata/distributed/init.h"
#include "strata/parallel/context_parallel.h"
#include "strata/parallel/ddp.h"
#include "strata/strata.h"

using namespace strata;
using bench::max_over_ranks;
using bench::median;
using bench::ms_since;

namespace {

struct Options {
  int64_t seq = 4096, width = 128, layers = 2, heads = 4, kv_heads = 2;
  int steps = 5, warmup = 1;
  std::string attention = "ring";
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--seq") o.seq = std::atoll(v.c_str());
    if (k == "--width") o.width = std::atoll(v.c_str());
    if (k == "--layers") o.layers = std::atoll(v.c_str());
    if (k == "--steps") o.steps = std::atoi(v.c_str());
    if (k == "--warmup") o.warmup = std::atoi(v.c_str());
    if (k == "--attention") o.attention = v;
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  dist::ProcessGroup& world = dist::init();
  nn::Llama model({.vocab_size = 256,
                   .context = o.seq,
                   .n_layer = o.layers,
                   .n_head = o.heads,
                   .n_kv_head = o.kv_heads,
                   .n_embd = o.width,
                   .intermediate_size = 4 * o.width,
                   .seed = 1});
  auto split = std::make_shared<parallel::ContextParallel>(
      world, parallel::ContextParallelOptions{.variant = o.attention == "ring"
                                                             ? parallel::ContextParallelAttention::Ring
                                                             : parallel::ContextParallelAttention::AllGather});
  std::unique_ptr<parallel::DistributedDataParallel> ddp;
  if (world.size() > 1) {
    model.set_context_split(split);
    ddp = std::make_unique<parallel::DistributedDataParallel>(model, world);
  }
  optim::AdamW optimizer(model.parameters(), {.lr = 3e-4, .weight_decay = 0.1});
  Generator gen(0);
  Tensor tokens = randint(0, 256, {1, o.seq}, {.dtype = DType::Int64}, &gen);
  Tensor targets = randint(0, 256, {1, o.seq}, {.dtype = DType::Int64}, &gen);
  if (world.size() > 1) {
    tokens = split->local(tokens, 1).contiguous();
    targets = split->local(targets, 1).contiguous();
  }
  std::vector<double> times, held, peaks, sent;
  double loss_value = 0;
  for (int i = 0; i < o.warmup + o.steps; ++i) {
    optimizer.zero_grad(/*set_to_none=*/true);
    world.barrier()->wait();
    const auto start_bytes = static_cast<double>(cpu_allocator::stats().in_use_bytes);
    cpu_allocator::reset_peak();
    parallel::reset_context_parallel_stats();
    const auto t0 = bench::Clock::now();
    Tensor loss = model.loss(tokens, targets);
    const double after_forward = static_cast<double>(cpu_allocator::stats().in_use_bytes) - start_bytes;
    loss.backward();
    optimizer.step();
    const double ms = ms_since(t0);
    const double peak = static_cast<double>(cpu_allocator::stats().peak_in_use_bytes) - start_bytes;
    loss_value = loss.item();
    if (i < o.warmup) continue;
    times.push_back(max_over_ranks(ms, world));
    held.push_back(max_over_ranks(after_forward, world));
    peaks.push_back(max_over_ranks(peak, world));
    sent.push_back(static_cast<double>(parallel::context_parallel_stats().bytes_sent));
  }
  if (world.rank() == 0)
    std::printf(
        "cp=%d attention=%s seq=%lld threads=%d step_ms=%.1f tokens_per_s=%.0f activation_mib=%.1f "
        "peak_mib=%.1f sent_mib=%.2f loss=%.4f\n",
        world.size(), world.size() > 1 ? o.attention.c_str() : "none", static_cast<long long>(o.seq),
        omp_get_max_threads(), median(times), static_cast<double>(o.seq) / (median(times) / 1e3),
        median(held) / (1 << 20), median(peaks) / (1 << 20), median(sent) / (1 << 20), loss_value);
  return 0;
}
