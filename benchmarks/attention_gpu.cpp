// Causal attention forward + backward on one GPU, fused (cuDNN) beside composed, at GPT-2
// 124M's head geometry (12 heads, 1024 tokens, head dimension 64, bf16) over a range of
// batches. Prints per call: the host time until the call returns (what the CPU spends
// issuing it) and the time until the GPU has finished it, for the public op (forward and
// backward) and for the pieces of the fused path (cuDNN's forward and backward executions
// and the zeroed float32 scratch the backward needs). A host time that grows with the batch
// is host work per sequence, which the GPU work does not need.
//   bench_attention_gpu [--batches 1,2,4,8] [--iters N] [--heads H] [--tokens T] [--dim D]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "strata/strata.h"

using namespace strata;

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// ms per call, medians: host time until the call returned, and until the GPU finished it.
struct Timing {
  double forward_host = 0, forward_done = 0, backward_host = 0, backward_done = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Runs `call` iters + 2 times (two to warm up), synchronizing before each; returns the
// median host time until `call` returned and until the device finished it.
template <class F>
std::pair<double, double> time_call(int iters, F&& call) {
  std::vector<double> host, done;
  for (int i = 0; i < iters + 2; ++i) {
    cuda::synchronize();
    const auto t0 = Clock::now();
    call();
    const double h = ms_since(t0);
    cuda::synchronize();
    if (i < 2) continue;
    host.push_back(h), done.push_back(ms_since(t0));
  }
  return {median(host), median(done)};
}

struct Inputs {
  Tensor q, k, v;
};

Inputs make_inputs(int64_t batch, int64_t heads, int64_t tokens, int64_t dim) {
  Generator gen(1);
  const Device gpu = Device::cuda(cuda::current_device());
  auto make = [&] {
    Tensor t = randn({batch, heads, tokens, dim}, {.dtype = DType::Float32}, &gen).to(gpu).to(DType::BFloat16);
    t.set_requires_grad(true);
    return t;
  };
  return {make(), make(), make()};
}

// q, k and v as the op receives them; `make` is called for every forward, so views of one
// leaf are fresh graph nodes each time.
using MakeInputs = std::function<Inputs()>;

// The public op: causal_attention forward, then backward of a ones gradient.
Timing time_op(const MakeInputs& make, int iters, bool autocast_bf16) {
  Timing t;
  Tensor out;
  auto forward = [&] {
    const Inputs in = make();
    autocast::Scope scope(DType::BFloat16, autocast_bf16);
    out = causal_attention(in.q, in.k, in.v);
  };
  std::tie(t.forward_host, t.forward_done) = time_call(iters, forward);
  const Tensor g = ones_like(out);
  std::tie(t.backward_host, t.backward_done) = time_call(iters, [&] {
    forward();
    cuda::synchronize();
    out.backward(g);
  });
  return t;
}

// As GPT-2's attention sees them under a bf16 autocast scope: float32 q, k, v as strided
// [B, H, T, D] views of one [B, T, 3, H, D] projection (the fused path converts them).
MakeInputs gpt_views(int64_t batch, int64_t heads, int64_t tokens, int64_t dim) {
  Generator gen(2);
  const Device gpu = Device::cuda(cuda::current_device());
  Tensor qkv = randn({batch, tokens, 3, heads, dim}, {.dtype = DType::Float32}, &gen).to(gpu);
  qkv.set_requires_grad(true);
  return [qkv] {
    auto part = [&](int64_t i) { return qkv.select(2, i).transpose(1, 2); };
    return Inputs{part(0), part(1), part(2)};
  };
}

void print_timing(const char* what, int64_t b, const Timing& t) {
  std::printf(
      "attention=%s batch=%lld forward host_ms=%.3f done_ms=%.3f forward+backward host_ms(backward)=%.3f "
      "done_ms=%.3f\n",
      what, static_cast<long long>(b), t.forward_host, t.forward_done, t.backward_host, t.backward_done);
}

// The fused path's pieces, without autograd: cuDNN forward, cuDNN backward (with its scratch).
void print_fused_pieces(const Inputs& in, int iters) {
  const Tensor q = in.q.detach(), k = in.k.detach(), v = in.v.detach();
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  std::optional<cuda_ops::FusedAttention> fwd;
  const auto [fh, fd] = time_call(iters, [&] { fwd = cuda_ops::fused_attention_forward(q, k, v, scale, true, true); });
  if (!fwd) {
    std::printf("  cuDNN took no plan\n");
    return;
  }
  const Tensor g = ones_like(fwd->out);
  const auto [bh, bd] = time_call(
      iters, [&] { (void)cuda_ops::fused_attention_backward(q, k, v, fwd->out, fwd->stats, g, scale, true); });
  const auto [zh, zd] =
      time_call(iters, [&] { (void)zeros(q.shape(), {.dtype = DType::Float32, .device = q.device()}); });
  std::printf(
      "  pieces: cudnn_forward host_ms=%.3f done_ms=%.3f cudnn_backward host_ms=%.3f done_ms=%.3f "
      "zeros_f32_like_q host_ms=%.3f done_ms=%.3f\n",
      fh, fd, bh, bd, zh, zd);
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
  std::printf("heads=%lld tokens=%lld dim=%lld bf16\n", static_cast<long long>(heads), static_cast<long long>(tokens),
              static_cast<long long>(dim));
  for (const bool fused : {true, false}) {
    cuda::set_fused_attention(fused);
    for (const int64_t b : batches) {
      const Inputs in = make_inputs(b, heads, tokens, dim);
      print_timing(fused ? "fused" : "composed", b, time_op([&] { return in; }, iters, false));
      if (fused) print_fused_pieces(in, iters);
      print_timing(fused ? "fused(gpt-views,autocast)" : "composed(gpt-views,autocast)", b,
                   time_op(gpt_views(b, heads, tokens, dim), iters, true));
      std::fflush(stdout);
    }
  }
  return 0;
}
