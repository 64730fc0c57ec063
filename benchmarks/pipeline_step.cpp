// Pipeline schedules measured: under mpirun -np P, a GPT of 8 blocks (width 256, 4 heads,
// context 128, vocab 256, so that the stages balance) split over P ranks, one training step =
// forward + backward of m micro-batches of one sequence each, then AdamW. For each schedule
// (GPipe, 1F1B, interleaved 1F1B with v = 2), m = 4 and 8, and 1F1B with recompute, every
// stage reports the median over 5 steps (after one warm-up) of:
//   step_ms     train_step end to end (the slowest rank's step is the pipeline's)
//   compute_ms  its forwards and backwards (parallel::PipelineStepStats)
//   bubble      (step - compute) / compute, beside the theory (p-1)/m, divided by v interleaved
//   act_mb      the allocator's peak in use during the step above its start (activations,
//               saved tensors, transfer buffers; the gradients exist already)
//   held        the most micro-batch chunks whose activations it held at once
// benchmarks/run_pipeline_step.sh runs it; docs/parallelism.md records the figures.
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.h"
#include "strata/distributed/init.h"
#include "strata/parallel/pipeline.h"
#include "strata/strata.h"

using namespace strata;
using bench::median;

namespace {

constexpr int kSteps = 5;  // timed, after one warm-up step

nn::GPTConfig config() {
  return {.vocab_size = 256, .context = 128, .n_layer = 8, .n_head = 4, .n_embd = 256, .dropout = 0.0, .seed = 5};
}

struct Case {
  parallel::PipelineScheduleKind kind;
  int m;
  int v;
  bool recompute;
};

void run(dist::ProcessGroup& world, const Case& c) {
  const int p = world.size();
  const auto partition = parallel::balanced_partition(nn::parameter_counts(config()), config().n_layer, p, c.v);
  nn::GPT model(config(), nullptr, parallel::stage_part(partition, p, world.rank()));
  model.set_recompute(c.recompute);
  optim::AdamW opt(model.parameters(), {.lr = 1e-4});
  parallel::Pipeline pipe(model, world, partition, {.schedule = c.kind, .micro_batches = c.m, .chunks = c.v});
  Generator gen(7);
  Tensor x = randint(0, config().vocab_size, {c.m, config().context}, {.dtype = DType::Int64}, &gen);
  Tensor y = randint(0, config().vocab_size, {c.m, config().context}, {.dtype = DType::Int64}, &gen);
  std::vector<double> step, compute, act, held;
  for (int s = 0; s <= kSteps; ++s) {
    world.barrier()->wait();
    opt.zero_grad();
    pipe.train_step(x, y);
    opt.step();
    if (s == 0) continue;
    const parallel::PipelineStepStats& st = pipe.last_step_stats();
    step.push_back(st.step_seconds * 1e3);
    compute.push_back(st.compute_seconds * 1e3);
    act.push_back(static_cast<double>(st.peak_activation_bytes) / 1e6);
    held.push_back(st.peak_in_flight);
  }
  // Every stage's figures to rank 0, which prints them in stage order.
  Tensor mine = from_vector(std::vector<double>{median(step), median(compute), median(act), median(held)}, {4});
  Tensor all = zeros({4 * p}, {.dtype = DType::Float64});
  world.all_gather(all, mine)->wait();
  if (world.rank() != 0) return;
  const double theory = static_cast<double>(p - 1) / c.m / c.v;
  std::printf("schedule=%s p=%d m=%d v=%d recompute=%d\n", parallel::to_string(c.kind), p, c.m, c.v,
              c.recompute ? 1 : 0);
  const double* f = all.data<double>();
  for (int r = 0; r < p; ++r) {
    const double s = f[4 * r], cm = f[4 * r + 1];
    std::printf("  rank=%d step_ms=%.1f compute_ms=%.1f bubble=%.3f theory=%.3f act_mb=%.2f held=%.0f\n", r, s, cm,
                (s - cm) / cm, theory, f[4 * r + 2], f[4 * r + 3]);
  }
  std::fflush(stdout);
}

}  // namespace

int main() {
  auto& world = dist::init();
  using K = parallel::PipelineScheduleKind;
  for (int m : {4, 8}) {
    run(world, {K::GPipe, m, 1, false});
    run(world, {K::OneFOneB, m, 1, false});
    if (m % world.size() == 0) run(world, {K::Interleaved1F1B, m, 2, false});
  }
  run(world, {K::OneFOneB, 8, 1, true});
  dist::finalize();
  return 0;
}
