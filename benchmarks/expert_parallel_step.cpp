// Expert parallelism on a mixture-of-experts layer (nn::MoE: 8 SwiGLU experts of width 256 ->
// 512, top-2 softmax gates, dropless): one training step (forward, a squared-error loss,
// backward, reduce_expert_parallel_gradients, AdamW) on --tokens global tokens split over the
// ranks, every rank a data rank and EP = world size (1 under one process: the whole layer
// and every token on one rank). Prints, on rank 0, the median step (the slowest rank's),
// tokens/s, the share of the step this rank spent in the token exchange's all_to_all_v
// (parallel::token_exchange_stats: dispatch and combine, forward and backward; the routing
// counts' exchange is not in it), and its bytes sent per step.
// benchmarks/run_expert_parallel_step.sh runs EP 1, 2 and 4 and prints the table.
//   mpirun -np N bench_expert_parallel_step [--tokens 4096] [--steps 5] [--warmup 1]
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "dist_bench_util.h"
#include "strata/distributed/device_mesh.h"
#include "strata/distributed/init.h"
#include "strata/parallel/expert_parallel.h"
#include "strata/parallel/token_exchange.h"
#include "strata/strata.h"

using namespace strata;
using bench::max_over_ranks;
using bench::median;
using bench::ms_since;

namespace {

struct Options {
  int64_t tokens = 4096, width = 256, intermediate = 512, experts = 8, top_k = 2;
  int steps = 5, warmup = 1;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const int64_t v = std::atoll(argv[i + 1]);
    if (k == "--tokens") o.tokens = v;
    if (k == "--width") o.width = v;
    if (k == "--experts") o.experts = v;
    if (k == "--steps") o.steps = static_cast<int>(v);
    if (k == "--warmup") o.warmup = static_cast<int>(v);
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  dist::ProcessGroup& world = dist::init();
  const int n = world.size();
  // EP 1: the plain layer (no dispatcher, no exchange), every expert here.
  dist::DeviceMesh mesh(world, {.dp = n, .ep = n});
  dist::ProcessGroup& experts_group = n > 1 ? mesh.group(dist::MeshDim::Expert) : world;
  nn::MoEConfig config{
      .hidden_size = o.width, .intermediate_size = o.intermediate, .num_experts = o.experts, .top_k = o.top_k};
  config = parallel::expert_parallel_config(config, experts_group);
  nn::MoE moe(config, nn::InitOptions{.std = 0.02, .by_name = true});
  moe.init_parameters(1);  // every rank, every degree: the same weights by name
  if (n > 1) parallel::enable_expert_parallel(moe, experts_group);
  optim::AdamW optimizer(moe.parameters(), {.lr = 3e-4, .weight_decay = 0.1});
  const int64_t local = o.tokens / n;
  Generator gen(static_cast<uint64_t>(7 + world.rank()));
  const Tensor x = randn({local, o.width}, {}, &gen), target = randn({local, o.width}, {}, &gen);
  std::vector<double> times, shares, sent;
  for (int i = 0; i < o.warmup + o.steps; ++i) {
    optimizer.zero_grad(/*set_to_none=*/true);
    world.barrier()->wait();
    parallel::reset_token_exchange_stats();
    const auto t0 = bench::Clock::now();
    Tensor diff = sub(moe.forward(x), target);
    Tensor loss = mean(mul(diff, diff));
    loss.backward();
    if (n > 1) parallel::reduce_expert_parallel_gradients(moe, world, mesh.group(dist::MeshDim::ExpertData));
    optimizer.step();
    const double ms = ms_since(t0);
    const parallel::TokenExchangeStats s = parallel::token_exchange_stats();
    if (i < o.warmup) continue;
    times.push_back(max_over_ranks(ms, world));
    shares.push_back(max_over_ranks(1e3 * s.seconds / ms, world));
    sent.push_back(static_cast<double>(s.bytes_sent));
  }
  if (world.rank() == 0)
    std::printf(
        "ep=%d tokens=%lld experts=%lld threads=%d step_ms=%.1f tokens_per_s=%.0f all_to_all_share=%.3f "
        "sent_mib=%.2f\n",
        n, static_cast<long long>(o.tokens), static_cast<long long>(o.experts), omp_get_max_threads(), median(times),
        static_cast<double>(o.tokens) / (median(times) / 1e3), median(shares), median(sent) / (1 << 20));
  return 0;
}
