// ZeroOptimizer on GPT: step time per stage beside DDP on the same ranks, and peak resident
// memory per stage beside the formulas. benchmarks/run_zero_step.sh runs both and prints the
// tables of docs/parallelism.md "ZeRO".
//
// Speed (default): the core benchmark's GPT (benchmarks/gpt_step.cpp: vocab 256, context 128,
// 4 layers, width 256, 4 heads, batch 8 per rank, AdamW, float32) under mpirun -np N. Six
// models with identical weights are stepped in turn, step by step (so drift of the shared
// vCPUs hits every mode alike): DistributedDataParallel + optim::AdamW (the DDP reference),
// ZeroOptimizer stages 0 (its own DDP), 1, 2 and 3, and stage 3 without prefetch. One step
// = loss, backward (gradients reduced), step, zero_grad. The ranks meet at a barrier before
// each step (not timed); a step's time is the slower rank's; the figures are medians, the
// ratios medians of the per-step ratios to the DDP reference's step. Per mode it also prints
// the median time of each phase (forward, backward, step, zero_grad) on rank 0.
//
// Memory (--memory MODE, MODE = ddp, 0, 1, 2 or 3; one mode per process, so that every peak
// is the process's own): builds the model and the optimizer, returns the allocator's cache
// (the model's construction-time storage) to the system, resets the peak resident set
// (echo 5 > /proc/self/clear_refs) and runs --steps training steps; the peak is VmHWM of
// /proc/self/status minus the resident set measured before the model was built (the MPI
// library, the process group, the token batch). It prints that beside the formula's
// model-state bytes and ZeroOptimizer::memory(). --dtype bfloat16 builds the GPT with bf16
// parameters (GPTConfig::param_dtype; layers cast them to float32 at use) and float32 master
// weights in ZeroOptimizer: the formula, trained for real (forward, backward, step).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "strata/distributed/init.h"
#include "strata/parallel/ddp.h"
#include "strata/parallel/zero.h"
#include "strata/strata.h"
#include "strata/tensor/allocator.h"

using namespace strata;
using Clock = std::chrono::steady_clock;
using bench::median;
using bench::ms_since;

namespace {

// A field of /proc/self/status in bytes ("VmRSS", "VmHWM"; the kernel reports kB).
int64_t proc_status_bytes(const std::string& field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(field + ":", 0) != 0) continue;
    std::istringstream in(line.substr(field.size() + 1));
    int64_t kb = 0;
    in >> kb;
    return kb * 1024;
  }
  return -1;
}

// Resets VmHWM to the current resident set (Linux >= 4.0); false where it is not allowed.
bool reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  f.flush();
  return f.good();
}

// The same GPT with bf16 parameters (float32 activations).
nn::GPTConfig with_bf16_parameters(nn::GPTConfig c) {
  c.param_dtype = DType::BFloat16;
  return c;
}

struct Phases {
  std::vector<double> forward, backward, step, zero_grad, total;
};

// One model under DDP + AdamW or under ZeroOptimizer (stage 0-3).
struct Runner {
  std::string name;
  nn::GPT model;
  std::unique_ptr<parallel::DistributedDataParallel> ddp;
  std::unique_ptr<optim::AdamW> opt;
  std::unique_ptr<parallel::ZeroOptimizer> zero;
  Phases phases;

  // stage < 0: DistributedDataParallel + optim::AdamW.
  Runner(std::string n, const nn::GPTConfig& c, dist::ProcessGroup& group, int stage, int64_t bucket_bytes,
         bool prefetch, bool bf16)
      : name(std::move(n)), model(bf16 ? with_bf16_parameters(c) : c) {
    const optim::AdamWOptions adamw{.lr = 3e-4, .weight_decay = 0.1};
    if (stage < 0) {
      ddp = std::make_unique<parallel::DistributedDataParallel>(
          model, group,
          parallel::DDPOptions{.bucket_cap_bytes = bucket_bytes, .first_bucket_cap_bytes = bucket_bytes / 4});
      opt = std::make_unique<optim::AdamW>(model.parameters(), adamw);
    } else {
      parallel::ZeroOptions o;
      o.stage = stage;
      o.bucket_cap_bytes = bucket_bytes;
      o.prefetch = prefetch;
      zero = std::make_unique<parallel::ZeroOptimizer>(model, adamw, group, o);
    }
  }

  // Returns the step's milliseconds; records the phases.
  double step(const Tensor& tokens, const Tensor& targets, bool record) {
    const auto t0 = Clock::now();
    Tensor loss = model.loss(tokens, targets);
    const double f = ms_since(t0);
    auto t = Clock::now();
    loss.backward();
    const double b = ms_since(t);
    t = Clock::now();
    if (opt) opt->step();
    else zero->step();
    const double s = ms_since(t);
    t = Clock::now();
    if (opt) opt->zero_grad();
    else zero->zero_grad();  // DDP: keeps the bucket views
    const double z = ms_since(t);
    const double all = ms_since(t0);
    if (record) {
      phases.forward.push_back(f);
      phases.backward.push_back(b);
      phases.step.push_back(s);
      phases.zero_grad.push_back(z);
      phases.total.push_back(all);
    }
    return all;
  }
};

// Model-state bytes per rank by the formula: parameters and gradients in the parameters'
// dtype (p bytes each), master weights in float32 when the parameters are not (m bytes),
// Adam's two float32 moments (k = 8 bytes), Ψ parameters on n ranks.
double formula_bytes(int stage, double psi, int n, double p, double m) {
  const double k = 8;
  switch (stage) {
    case 0: return (2 * p + m + k) * psi;            // bf16: 16Ψ; float32: 16Ψ
    case 1: return 2 * p * psi + (m + k) * psi / n;  // bf16: 4Ψ + 12Ψ/N
    case 2: return p * psi + (p + m + k) * psi / n;  // bf16: 2Ψ + 14Ψ/N
    default: return (2 * p + m + k) * psi / n;       // 16Ψ/N
  }
}

int run_memory(dist::ProcessGroup& world, const std::string& mode, const nn::GPTConfig& config, int64_t B, int64_t T,
               int steps, bool bf16, int64_t bucket_bytes) {
  const int stage = mode == "ddp" ? -1 : std::atoi(mode.c_str());
  Generator gen(1000 + static_cast<uint64_t>(world.rank()));
  Tensor tokens = randint(0, config.vocab_size, {B, T}, {.dtype = DType::Int64}, &gen);
  Tensor targets = randint(0, config.vocab_size, {B, T}, {.dtype = DType::Int64}, &gen);
  {  // OpenBLAS allocates its work buffers at its first call: make them part of the baseline
    Tensor a = ones({256, 256});
    Tensor c = matmul(a, a);
    (void)c;
  }
  world.barrier()->wait();
  const int64_t baseline = proc_status_bytes("VmRSS");
  const size_t baseline_tensors = cpu_allocator::stats().in_use_bytes;

  Runner r(mode, config, world, stage, bucket_bytes, true, bf16);
  const double psi = static_cast<double>(r.model.num_parameters());
  // The model's construction-time storage (replaced by the buckets) sits in the allocator's
  // cache: return it, then measure the peak of training from here.
  cpu_allocator::empty_cache();
  const int64_t built = proc_status_bytes("VmRSS");
  const bool reset = reset_peak_rss();
  cpu_allocator::reset_peak();
  for (int i = 0; i < steps; ++i) r.step(tokens, targets, false);
  const int64_t peak = proc_status_bytes("VmHWM");
  const int64_t end = proc_status_bytes("VmRSS");
  const AllocatorStats st = cpu_allocator::stats();
  parallel::ZeroMemory report;
  if (r.zero) {
    report = r.zero->memory();
  } else {  // DDP: parameters, gradient buckets, AdamW's moments
    for (const Tensor& p : r.model.parameters()) report.parameters += static_cast<int64_t>(p.nbytes());
    report.gradients = report.parameters;
    for (const auto& [key, t] : r.opt->state_dict())
      if (key.rfind("state.", 0) == 0) report.optimizer_state += static_cast<int64_t>(t.nbytes());
  }
  // Every rank's figures; rank 0 prints the largest (ranks differ by padding at most).
  std::vector<double> mine{static_cast<double>(peak - baseline), static_cast<double>(built - baseline),
                           static_cast<double>(end - baseline), static_cast<double>(baseline),
                           static_cast<double>(st.peak_in_use_bytes - baseline_tensors)};
  Tensor x = from_vector(mine, {static_cast<int64_t>(mine.size())}).to(DType::Float64);
  world.all_reduce(x, dist::ReduceOp::Max)->wait();
  const auto v = x.to_vector<double>();
  if (world.rank() == 0) {
    const double p = bf16 ? 2 : 4, m = bf16 ? 4 : 0;
    const double formula = formula_bytes(std::max(stage, 0), psi, world.size(), p, m);
    std::printf(
        "mode=%s ranks=%d dtype=%s psi=%.0f peak_reset=%d formula_mb=%.1f report_mb=%.1f "
        "report_params_mb=%.1f report_grads_mb=%.1f report_master_mb=%.1f report_optim_mb=%.1f "
        "peak_rss_mb=%.1f built_rss_mb=%.1f end_rss_mb=%.1f baseline_rss_mb=%.1f peak_tensor_mb=%.1f\n",
        mode.c_str(), world.size(), bf16 ? "bfloat16" : "float32", psi, reset ? 1 : 0, formula / 1e6,
        report.total() / 1e6, report.parameters / 1e6, report.gradients / 1e6, report.master / 1e6,
        report.optimizer_state / 1e6, v[0] / 1e6, v[1] / 1e6, v[2] / 1e6, v[3] / 1e6, v[4] / 1e6);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 20, warmup = 3;
  double bucket_mb = 4;
  std::string memory_mode, dtype = "float32", config_name;
  int64_t layers = -1, width = -1, batch = -1, seq = -1;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (k == "--steps") steps = std::atoi(next().c_str());
    else if (k == "--warmup") warmup = std::atoi(next().c_str());
    else if (k == "--bucket-mb") bucket_mb = std::atof(next().c_str());
    else if (k == "--memory") memory_mode = next();
    else if (k == "--dtype") dtype = next();
    else if (k == "--layers") layers = std::atoll(next().c_str());
    else if (k == "--width") width = std::atoll(next().c_str());
    else if (k == "--batch") batch = std::atoll(next().c_str());
    else if (k == "--seq") seq = std::atoll(next().c_str());
    else {
      std::fprintf(stderr,
                   "usage: %s [--steps N] [--warmup N] [--bucket-mb MB] [--memory ddp|0|1|2|3 [--dtype "
                   "float32|bfloat16]] [--layers L --width C --batch B --seq T]\n",
                   argv[0]);
      return 2;
    }
  }
  if (!memory_mode.empty() && memory_mode != "ddp" && memory_mode != "0" && memory_mode != "1" && memory_mode != "2" &&
      memory_mode != "3") {
    std::fprintf(stderr, "--memory: expected ddp, 0, 1, 2 or 3, got '%s'\n", memory_mode.c_str());
    return 2;
  }
  if (dtype != "float32" && dtype != "bfloat16") {
    std::fprintf(stderr, "--dtype: expected float32 or bfloat16, got '%s'\n", dtype.c_str());
    return 2;
  }
  auto& world = dist::init();
  const int64_t bucket_bytes = static_cast<int64_t>(bucket_mb * (1 << 20));

  if (!memory_mode.empty()) {
    // Model states dominate: 8 layers of width 512 (25.3M parameters), 32 tokens per rank.
    const int64_t L = layers > 0 ? layers : 8, C = width > 0 ? width : 512;
    const int64_t B = batch > 0 ? batch : 1, T = seq > 0 ? seq : 32;
    const nn::GPTConfig config{
        .vocab_size = 256, .context = std::max<int64_t>(T, 64), .n_layer = L, .n_head = C / 64, .n_embd = C, .seed = 0};
    if (dtype == "bfloat16" && memory_mode == "ddp") {
      std::fprintf(stderr, "--dtype bfloat16 needs a ZeRO stage (DDP + AdamW has no float32 master)\n");
      return 2;
    }
    return run_memory(world, memory_mode, config, B, T, steps, dtype == "bfloat16", bucket_bytes);
  }

  const int64_t L = layers > 0 ? layers : 4, C = width > 0 ? width : 256;
  const int64_t B = batch > 0 ? batch : 8, T = seq > 0 ? seq : 128;
  const nn::GPTConfig config{.vocab_size = 256,
                             .context = std::max<int64_t>(T, 128),
                             .n_layer = L,
                             .n_head = std::max<int64_t>(C / 64, 1),
                             .n_embd = C,
                             .seed = 0};
  Generator gen(1000 + static_cast<uint64_t>(world.rank()));  // each rank its own batch
  Tensor tokens = randint(0, 256, {B, T}, {.dtype = DType::Int64}, &gen);
  Tensor targets = randint(0, 256, {B, T}, {.dtype = DType::Int64}, &gen);

  std::vector<std::unique_ptr<Runner>> runners;
  runners.push_back(std::make_unique<Runner>("ddp", config, world, -1, bucket_bytes, true, false));
  for (int s = 0; s <= 3; ++s)
    runners.push_back(
        std::make_unique<Runner>("stage" + std::to_string(s), config, world, s, bucket_bytes, true, false));
  runners.push_back(std::make_unique<Runner>("stage3_noprefetch", config, world, 3, bucket_bytes, false, false));
  const size_t M = runners.size();

  std::vector<std::vector<double>> times(M);
  for (int i = 0; i < warmup + steps; ++i) {
    for (size_t m = 0; m < M; ++m) {
      world.barrier()->wait();
      const double ms = runners[m]->step(tokens, targets, i >= warmup);
      if (i >= warmup) times[m].push_back(ms);
    }
  }
  for (auto& t : times) {  // a step's time is the slower rank's
    Tensor x = from_vector(t, {static_cast<int64_t>(t.size())}).to(DType::Float64);
    world.all_reduce(x, dist::ReduceOp::Max)->wait();
    t = x.to_vector<double>();
  }
  if (world.rank() == 0) {
    std::printf("ranks=%d psi=%lld layers=%lld width=%lld batch=%lld seq=%lld bucket_mb=%g steps=%d\n", world.size(),
                static_cast<long long>(runners[0]->model.num_parameters()), static_cast<long long>(L),
                static_cast<long long>(C), static_cast<long long>(B), static_cast<long long>(T), bucket_mb, steps);
    for (size_t m = 0; m < M; ++m) {
      std::vector<double> ratio;
      for (size_t i = 0; i < times[m].size(); ++i) ratio.push_back(times[m][i] / times[0][i]);
      std::vector<double> sorted = times[m];
      std::sort(sorted.begin(), sorted.end());
      const Phases& p = runners[m]->phases;
      std::printf("%s_ms=%.2f %s_p10=%.2f %s_p90=%.2f %s_ratio=%.3f %s_phases=fwd:%.1f,bwd:%.1f,step:%.1f,zero:%.1f\n",
                  runners[m]->name.c_str(), median(times[m]), runners[m]->name.c_str(), sorted[sorted.size() / 10],
                  runners[m]->name.c_str(), sorted[sorted.size() * 9 / 10], runners[m]->name.c_str(), median(ratio),
                  runners[m]->name.c_str(), median(p.forward), median(p.backward), median(p.step), median(p.zero_grad));
    }
  }
  return 0;
}
