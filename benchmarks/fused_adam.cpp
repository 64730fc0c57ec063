// The multi-tensor AdamW step over GPT-2 124M's parameters (fp32 master weights, and with
// --low-copy a bf16 copy written in the same pass) beside a plain copy on the same device
// in the same run: bytes moved per second by each, and their ratio (issue target on a GPU:
// AdamW >= 85% of the copy's bandwidth).
//   bench_fused_adam [--device cpu|cuda] [--steps N] [--low-copy] [--chunk ELEMENTS]
// Bytes moved: AdamW reads param, grad, exp_avg, exp_avg_sq and writes param, exp_avg,
// exp_avg_sq (28 bytes per fp32 element, 30 with the bf16 copy); the copy reads and writes
// one buffer of the same 16 bytes per element (32 bytes per element moved).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_util.h"
#include "optim/multi_tensor.h"
#include "strata/strata.h"

using namespace strata;

namespace {

// GPT-2 124M: wte, wpe, 12 blocks, final norm (Hugging Face layout; 124,439,808 elements).
std::vector<Shape> gpt2_small_shapes() {
  const int64_t v = 50257, c = 1024, d = 768;
  std::vector<Shape> s{{v, d}, {c, d}};
  for (int l = 0; l < 12; ++l) {
    for (Shape x :
         std::vector<Shape>{{d}, {d}, {d, 3 * d}, {3 * d}, {d, d}, {d}, {d}, {d}, {d, 4 * d}, {4 * d}, {4 * d, d}, {d}})
      s.push_back(x);
  }
  s.push_back({d});
  s.push_back({d});
  return s;
}

void sync(Device d) {
  if (d.is_cuda()) cuda::synchronize(d.index);
}

}  // namespace

int main(int argc, char** argv) {
  Device device = Device::cpu();
  int steps = 10;
  bool low_copy = false;
  int64_t chunk = strata_kernels::kDefaultChunkElements;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--device" && i + 1 < argc) {
      device = std::string(argv[++i]) == "cuda" ? Device::cuda(0) : Device::cpu();
    } else if (a == "--steps" && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
    } else if (a == "--low-copy") {
      low_copy = true;
    } else if (a == "--chunk" && i + 1 < argc) {
      chunk = std::atoll(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: bench_fused_adam [--device cpu|cuda] [--steps N] [--low-copy] [--chunk ELEMENTS]\n");
      return 2;
    }
  }
  try {
    std::vector<optim::multi_tensor::AdamTensorArgs> tensors;
    int64_t n = 0;
    for (const Shape& shape : gpt2_small_shapes()) {
      optim::multi_tensor::AdamTensorArgs a;
      a.param = full(shape, 0.01, {.device = device});
      a.grad = full(shape, 1e-3, {.device = device});
      a.exp_avg = zeros(shape, {.device = device});
      a.exp_avg_sq = zeros(shape, {.device = device});
      if (low_copy) a.low_copy = zeros(shape, {.dtype = DType::BFloat16, .device = device});
      a.lr = 1e-4;
      a.weight_decay = 0.1;
      a.step = 1;
      n += a.param.numel();
      tensors.push_back(a);
    }
    const optim::multi_tensor::AdamHyper hyper{.decoupled_weight_decay = true};
    optim::multi_tensor::fused_adam_step(tensors, hyper, chunk);  // warm-up
    sync(device);
    bench::Clock::time_point t0 = bench::Clock::now();
    for (int s = 0; s < steps; ++s) optim::multi_tensor::fused_adam_step(tensors, hyper, chunk);
    sync(device);
    const double adam_ms = bench::ms_since(t0) / steps;

    const Tensor src = full({4 * n}, 1.0, {.device = device});
    Tensor dst = zeros({4 * n}, {.device = device});
    dst.copy_(src);
    sync(device);
    t0 = bench::Clock::now();
    for (int s = 0; s < steps; ++s) dst.copy_(src);
    sync(device);
    const double copy_ms = bench::ms_since(t0) / steps;

    const double adam_gbs = (low_copy ? 30.0 : 28.0) * static_cast<double>(n) / adam_ms / 1e6;
    const double copy_gbs = 32.0 * static_cast<double>(n) / copy_ms / 1e6;
    std::printf("fused AdamW, %lld fp32 parameters in %zu tensors on %s%s, chunks of %lld: %.3f ms/step, %.1f GB/s\n",
                static_cast<long long>(n), tensors.size(), device.str().c_str(), low_copy ? " (+bf16 copy)" : "",
                static_cast<long long>(chunk), adam_ms, adam_gbs);
    std::printf("copy of %lld bytes on %s: %.3f ms, %.1f GB/s\n", static_cast<long long>(16 * n), device.str().c_str(),
                copy_ms, copy_gbs);
    std::printf("AdamW / copy bandwidth: %.3f\n", adam_gbs / copy_gbs);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_fused_adam: %s\n", e.what());
    return 1;
  }
  return 0;
}
