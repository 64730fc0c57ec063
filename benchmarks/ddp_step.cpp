// DistributedDataParallel on the GPT of the core benchmark (benchmarks/gpt_step.cpp: vocab
// 256, context 128, 4 layers, width 256, 4 heads, batch 8 per rank, AdamW), one training
// step = forward, backward (gradients averaged), AdamW, zero_grad.
//
// Under mpirun -np 2 it times, interleaved step by step (so that drift of the shared vCPUs
// hits every mode alike), three models with identical weights:
//   overlap     DDP as shipped: each bucket's all_reduce starts during backward
//   no_overlap  DDP with overlap = false: every bucket is reduced after backward
//   compute     the same DDP under no_sync(): both ranks compute, nothing is communicated
// Before each step the ranks meet at a barrier (not timed); a step's time is the larger of
// the two ranks' times; the figures are medians. Alone (world size 1, or --single) it times
// the plain model without DDP: the 1-rank throughput for the scaling figure.
// It also prints the CPU time per step of every thread of the process other than the main
// thread (the MPI engine's worker, Open MPI's own threads), per mode.
// benchmarks/run_ddp_step.sh runs it beside PyTorch's DDP and prints the table.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "strata/distributed/init.h"
#include "strata/parallel/ddp.h"
#include "strata/strata.h"

using namespace strata;
using Clock = std::chrono::steady_clock;
using bench::median;

namespace {

// CPU seconds (user + system) of each thread of this process but the main one, by thread id.
std::map<int, std::pair<std::string, double>> thread_cpu() {
  std::map<int, std::pair<std::string, double>> out;
  const int self = static_cast<int>(getpid());
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  DIR* dir = opendir("/proc/self/task");
  if (!dir) return out;
  while (dirent* e = readdir(dir)) {
    const int tid = std::atoi(e->d_name);
    if (tid <= 0 || tid == self) continue;
    std::ifstream f("/proc/self/task/" + std::string(e->d_name) + "/stat");
    std::string line;
    std::getline(f, line);
    const size_t open = line.find('('), close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    std::string field;
    std::vector<std::string> fields;
    while (rest >> field) fields.push_back(field);
    if (fields.size() < 13) continue;
    // After "(comm) ": state is field 3 of stat, utime 14, stime 15.
    out[tid] = {line.substr(open + 1, close - open - 1), (std::stod(fields[11]) + std::stod(fields[12])) / tick};
  }
  closedir(dir);
  return out;
}

struct Runner {
  nn::GPT model;
  std::unique_ptr<parallel::DistributedDataParallel> ddp;
  optim::AdamW opt;
  bool no_sync = false;
  Runner(const nn::GPTConfig& c, dist::ProcessGroup* group, parallel::DDPOptions options)
      : model(c), opt(model.parameters(), {.lr = 3e-4, .weight_decay = 0.1}) {
    if (group) ddp = std::make_unique<parallel::DistributedDataParallel>(model, *group, options);
  }
  double step(const Tensor& tokens, const Tensor& targets) {
    const auto t0 = Clock::now();
    Tensor loss = model.loss(tokens, targets);
    if (no_sync) {
      auto guard = ddp->no_sync();
      loss.backward();
    } else {
      loss.backward();
    }
    opt.step();
    opt.zero_grad(/*set_to_none=*/false);  // keeps the bucket views (no copy back into the buckets)
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  }
};

}  // namespace

int main(int argc, char** argv) {
  int steps = 20, warmup = 3;
  double bucket_mb = 4, first_bucket_mb = 1;
  bool single = false;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (k == "--steps") steps = std::atoi(next().c_str());
    else if (k == "--warmup") warmup = std::atoi(next().c_str());
    else if (k == "--bucket-mb") bucket_mb = std::atof(next().c_str());
    else if (k == "--first-bucket-mb") first_bucket_mb = std::atof(next().c_str());
    else if (k == "--single") single = true;
    else {
      std::fprintf(stderr, "usage: %s [--steps N] [--warmup N] [--bucket-mb MB] [--first-bucket-mb MB] [--single]\n",
                   argv[0]);
      return 2;
    }
  }
  auto& world = dist::init();
  const int64_t B = 8, T = 128;
  const nn::GPTConfig config{.vocab_size = 256, .context = 128, .n_layer = 4, .n_head = 4, .n_embd = 256, .seed = 0};
  Generator gen(1000 + static_cast<uint64_t>(world.rank()));  // each rank its own batch
  Tensor tokens = randint(0, 256, {B, T}, {.dtype = DType::Int64}, &gen);
  Tensor targets = randint(0, 256, {B, T}, {.dtype = DType::Int64}, &gen);

  if (single || world.size() == 1) {
    if (world.rank() == 0) {
      Runner plain(config, nullptr, {});
      std::vector<double> times;
      for (int i = 0; i < warmup + steps; ++i) {
        const double ms = plain.step(tokens, targets);
        if (i >= warmup) times.push_back(ms);
      }
      const double ms = median(times);
      std::printf("single_ms=%.2f tokens_per_s=%.1f\n", ms, B * T / (ms / 1e3));
    }
    return 0;
  }

  const auto mib = [](double mb) { return static_cast<int64_t>(mb * (1 << 20)); };
  parallel::DDPOptions with{.bucket_cap_bytes = mib(bucket_mb), .first_bucket_cap_bytes = mib(first_bucket_mb)};
  parallel::DDPOptions without = with;
  without.overlap = false;
  const char* names[] = {"overlap", "no_overlap", "compute"};
  std::vector<std::unique_ptr<Runner>> runners;
  runners.push_back(std::make_unique<Runner>(config, &world, with));
  runners.push_back(std::make_unique<Runner>(config, &world, without));
  runners.push_back(std::make_unique<Runner>(config, &world, with));
  runners[2]->no_sync = true;

  std::vector<std::vector<double>> times(3);
  std::vector<std::map<int, std::pair<std::string, double>>> cpu(3);  // thread CPU seconds per mode
  for (int i = 0; i < warmup + steps; ++i) {
    for (int m = 0; m < 3; ++m) {
      world.barrier()->wait();
      auto before = thread_cpu();
      const double ms = runners[m]->step(tokens, targets);
      auto after = thread_cpu();
      if (i < warmup) continue;
      times[m].push_back(ms);
      for (auto& [tid, v] : after) {
        auto& slot = cpu[m][tid];
        slot.first = v.first;
        slot.second += v.second - (before.count(tid) ? before[tid].second : 0.0);
      }
    }
  }
  // A step's time is the slower rank's.
  for (auto& t : times) {
    Tensor x = from_vector(t, {static_cast<int64_t>(t.size())}).to(DType::Float64);
    world.all_reduce(x, dist::ReduceOp::Max)->wait();
    t = x.to_vector<double>();
  }
  const double overlap = median(times[0]), no_overlap = median(times[1]), compute = median(times[2]);
  if (world.rank() == 0) {
    const auto buckets = runners[0]->ddp->bucket_bytes();
    std::printf("buckets=%zu bucket_mb=%g first_bucket_mb=%g\n", buckets.size(), bucket_mb, first_bucket_mb);
    for (int m = 0; m < 3; ++m) {
      std::vector<double> sorted = times[m];
      std::sort(sorted.begin(), sorted.end());
      std::printf("%s_ms=%.2f %s_p10=%.2f %s_p90=%.2f\n", names[m], median(times[m]), names[m],
                  sorted[sorted.size() / 10], names[m], sorted[sorted.size() * 9 / 10]);
    }
    std::printf("tokens_per_s_2rank=%.1f\n", 2 * B * T / (overlap / 1e3));
    // The modes run in turn, so step i of each saw the same machine: the medians of the
    // per-step differences are steadier than differences of medians.
    std::vector<double> exposed, saved;
    for (size_t i = 0; i < times[0].size(); ++i) {
      exposed.push_back(times[1][i] - times[2][i]);  // communication not hidden without overlap
      saved.push_back(times[1][i] - times[0][i]);    // what overlap saves of it
    }
    std::printf("exposed_paired_ms=%.2f saved_paired_ms=%.2f\n", median(exposed), median(saved));
    (void)no_overlap;
    (void)compute;
    for (int m = 0; m < 3; ++m) {
      std::printf("threads_%s:", names[m]);
      for (auto& [tid, v] : cpu[m])
        if (v.second > 0) std::printf(" %s/%d=%.2fms", v.first.c_str(), tid, 1e3 * v.second / steps);
      std::printf("\n");
    }
  }
  return 0;
}
