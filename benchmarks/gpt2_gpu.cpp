// GPT-2 124M (12 layers, width 768, 12 heads, context 1024, vocabulary 50257 padded to 50304)
// training on one GPU: bf16 autocast (or float32), fused AdamW, at the largest batch that fits
// (or --batch).
// Prints one line: batch, median step time, tokens/s and MFU against --peak-tflops (the
// GPU's dense bf16 peak; scripts/gpu/run_checks.sh passes it with GPT2_BENCH=1). The PyTorch
// peer is benchmarks/gpt2_gpu_torch.py, run beside it by that script.
//   bench_gpt2_gpu [--batch B] [--steps N] [--warmup N] [--precision bf16|fp32] [--peak-tflops X]
//                  [--attention fused|composed] [--activations bf16|fp32] [--profile]
// --activations: under bf16, keep activations 16-bit end to end (autocast::Options::activations,
// the default) or float32 between ops (products only, as torch.autocast).
// --profile: after the timed steps, profiles one more step (strata/profiler/profiler.h) and
// prints its op table, sorted by device time.
// fused (the default) runs cuDNN's flash attention where it takes the problem
// (strata::cuda::set_fused_attention); composed keeps the [B, H, T, T] probabilities.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "strata/strata.h"

using namespace strata;

namespace {

struct Options {
  int64_t batch = 0;  // 0: the largest that fits
  int steps = 10, warmup = 3;
  bool bf16 = true;
  bool bf16_activations = true;
  double peak_tflops = 989.0;  // H100 SXM dense bf16
  bool fused_attention = true;
  bool profile = false;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--profile") {
      o.profile = true;
      --i;  // a flag: no value follows
      continue;
    }
    if (i + 1 == argc) {
      std::fprintf(stderr, "bench_gpt2_gpu: option %s needs a value\n", k.c_str());
      std::exit(2);
    }
    const std::string v = argv[i + 1];
    if (k == "--batch") o.batch = std::atoll(v.c_str());
    else if (k == "--steps") o.steps = std::atoi(v.c_str());
    else if (k == "--warmup") o.warmup = std::atoi(v.c_str());
    else if (k == "--precision") o.bf16 = v == "bf16";
    else if (k == "--peak-tflops") o.peak_tflops = std::atof(v.c_str());
    else if (k == "--attention") o.fused_attention = v == "fused";
    else if (k == "--activations") o.bf16_activations = v == "bf16";
    else {
      std::fprintf(stderr, "bench_gpt2_gpu: unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  return o;
}

// The vocabulary padded to 50304 rows (a multiple of 128), as llm.c does: 50257 rows put the
// head's GEMMs on unaligned kernels. The padding rows are zero and take no part in the loss.
const nn::GPTConfig kGpt2{.vocab_size = 50257,
                          .padded_vocab_size = nn::pad_vocab_size(50257, 128),
                          .context = 1024,
                          .n_layer = 12,
                          .n_head = 12,
                          .n_embd = 768,
                          .seed = 0};

struct Trainer {
  nn::GPT model{kGpt2};
  Device gpu = Device::cuda(cuda::current_device());
  bool bf16;
  bool bf16_activations = true;
  std::unique_ptr<optim::AdamW> opt;  // built after the model moved to the GPU
  explicit Trainer(bool use_bf16) : bf16(use_bf16) {
    model.to(gpu);
    opt = std::make_unique<optim::AdamW>(model.parameters(), optim::AdamWOptions{.lr = 6e-4, .weight_decay = 0.1});
  }

  void step(const Tensor& tokens, const Tensor& targets) {
    Tensor loss;
    {
      autocast::Scope scope(DType::BFloat16, {.activations = bf16_activations}, bf16);
      loss = model.loss(tokens, targets);
    }
    loss.backward();
    opt->step();
    opt->zero_grad(/*set_to_none=*/true);
  }
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (!cuda::is_available()) {
    std::printf("bench_gpt2_gpu: skipped (no GPU visible)\n");
    return 0;
  }
  cuda::set_fused_attention(o.fused_attention);
  const int64_t T = kGpt2.context;
  Trainer trainer(o.bf16);
  trainer.bf16_activations = o.bf16_activations;
  Generator gen(0);
  std::vector<int64_t> candidates{64, 48, 32, 24, 16, 12, 8, 4, 2, 1};
  if (o.batch > 0) candidates = {o.batch};
  int64_t batch = 0;
  Tensor tokens, targets;
  for (int64_t b : candidates) {
    try {
      tokens = randint(0, kGpt2.vocab_size, {b, T}, {.dtype = DType::Int64}, &gen).to(trainer.gpu);
      targets = randint(0, kGpt2.vocab_size, {b, T}, {.dtype = DType::Int64}, &gen).to(trainer.gpu);
      trainer.step(tokens, targets);  // fits, and warms up the allocator at this size
      cuda::synchronize();
      batch = b;
      break;
    } catch (const Error& e) {
      if (std::strstr(e.what(), "out of memory") == nullptr) throw;
      trainer.opt->zero_grad(true);
      std::fprintf(stderr, "batch %lld does not fit; trying a smaller one\n", static_cast<long long>(b));
    }
  }
  if (batch == 0) {
    std::printf("bench_gpt2_gpu: no batch fits\n");
    return 1;
  }
  for (int i = 1; i < o.warmup; ++i) trainer.step(tokens, targets);
  cuda::synchronize();
  // host: until step() returned (what the CPU spends issuing the step); times: until the GPU
  // finished it. host close to times means the host, not the GPU, sets the pace.
  std::vector<double> times, host;
  for (int i = 0; i < o.steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    trainer.step(tokens, targets);
    host.push_back(seconds_since(t0));
    cuda::synchronize();
    times.push_back(seconds_since(t0));
  }
  std::sort(times.begin(), times.end());
  std::sort(host.begin(), host.end());
  const double median = times[times.size() / 2];
  const double tokens_per_s = static_cast<double>(batch * T) / median;
  const double mfu = trainer.model.flops_per_step(batch, T) / median / (o.peak_tflops * 1e12);
  std::printf("strata precision=%s attention=%s batch=%lld step_ms=%.1f host_ms=%.1f tokens_per_s=%.0f mfu=%.3f\n",
              o.bf16 ? "bf16" : "fp32", o.fused_attention ? "fused" : "composed", static_cast<long long>(batch),
              median * 1e3, host[host.size() / 2] * 1e3, tokens_per_s, mfu);
  if (o.profile) {  // after the timed steps, so their times do not include the profiler's
    profiler::Session session;
    trainer.step(tokens, targets);
    std::printf("profile of one step (batch %lld):\n%s", static_cast<long long>(batch), session.table().c_str());
  }
  return 0;
}
