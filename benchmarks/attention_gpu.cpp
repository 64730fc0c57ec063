// Causal attention forward + backward on one GPU, fused (cuDNN) beside composed, at GPT-2
// 124M's head geometry (12 heads, 1024 tokens, head dimension 64, bf16) over a range of
// batches. Prints per call: the host time until the call returns (what the CPU spends
// issuing it) and the time until the GPU has finished it. A fused attention whose host time
// grows with the batch spends host time per sequence, which the GPU work does not need.
//   bench_attention_gpu [--batches 1,2,4,8] [--iters N] [--heads H] [--tokens T] [--dim D]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "strata/strata.h"

using namespace strata;

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

struct Timing {
  double forward_host = 0, backward_host = 0, total = 0;  // ms per call, medians
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Timing time_attention(int64_t batch, int64_t heads, int64_t tokens, int64_t dim, int iters) {
  Generator gen(1);
  const Device gpu = Device::cuda(cuda::current_device());
  auto make = [&] {
    Tensor t = randn({batch, heads, tokens, dim}, {.dtype = DType::Float32}, &gen).to(gpu).to(DType::BFloat16);
    t.set_requires_grad(true);
    return t;
  };
  Tensor q = make(), k = make(), v = make();
  std::vector<double> fwd, bwd, total;
  for (int i = 0; i < iters + 2; ++i) {  // the first two warm up plans and the allocator
    cuda::synchronize();
    const auto t0 = Clock::now();
    Tensor out = causal_attention(q, k, v);
    const double f = ms_since(t0);
    Tensor g = ones_like(out);
    cuda::synchronize();
    const auto t1 = Clock::now();
    out.backward(g);
    const double b = ms_since(t1);
    cuda::synchronize();
    const double all = ms_since(t0);
    q.set_grad(Tensor()), k.set_grad(Tensor()), v.set_grad(Tensor());
    if (i < 2) continue;
    fwd.push_back(f), bwd.push_back(b), total.push_back(all);
  }
  return {median(fwd), median(bwd), median(total)};
}

std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::atoll(item.c_str()));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> batches{1, 2, 4, 8};
  int iters = 10;
  int64_t heads = 12, tokens = 1024, dim = 64;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--batches") batches = parse_list(v);
    else if (k == "--iters") iters = std::atoi(v.c_str());
    else if (k == "--heads") heads = std::atoll(v.c_str());
    else if (k == "--tokens") tokens = std::atoll(v.c_str());
    else if (k == "--dim") dim = std::atoll(v.c_str());
    else {
      std::fprintf(stderr, "bench_attention_gpu: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (!cuda::is_available()) {
    std::printf("bench_attention_gpu: skipped (no GPU visible)\n");
    return 0;
  }
  for (const bool fused : {true, false}) {
    cuda::set_fused_attention(fused);
    for (const int64_t b : batches) {
      const Timing t = time_attention(b, heads, tokens, dim, iters);
      std::printf("attention=%s batch=%lld heads=%lld tokens=%lld dim=%lld forward_host_ms=%.3f "
                  "backward_host_ms=%.3f forward_backward_ms=%.3f\n",
                  fused ? "fused" : "composed", static_cast<long long>(b), static_cast<long long>(heads),
                  static_cast<long long>(tokens), static_cast<long long>(dim), t.forward_host, t.backward_host,
                  t.total);
      std::fflush(stdout);
    }
  }
  return 0;
}
