// The row ops (layer_norm, rms_norm, softmax, cross-entropy) forward + backward on the GPT
// benchmark's shapes (1024 rows of 256; cross-entropy also 64 rows of a GPT-2 vocabulary),
// printing one line per op with the time at the 25th percentile of the repetitions (the
// machine's noise is one-sided). benchmarks/run_row_ops.sh runs it beside PyTorch.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "strata/strata.h"

using namespace strata;

namespace {

template <class F>
double quartile_us(F&& f, int reps) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 4];
}

Tensor leaf(const Tensor& t) { return t.detach().set_requires_grad(true); }

}  // namespace

int main(int argc, char** argv) {
  int reps = 41;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::atoi(argv[i + 1]);
  Generator gen(1);
  const Tensor x = randn({1024, 256}, {}, &gen), g = randn({1024, 256}, {}, &gen);
  const Tensor w = leaf(randn({256}, {}, &gen)), b = leaf(randn({256}, {}, &gen));
  const Tensor targets = randint(0, 256, {1024}, {.dtype = DType::Int64}, &gen);
  const Tensor vocab = randn({64, 50257}, {}, &gen);
  const Tensor vocab_targets = randint(0, 50257, {64}, {.dtype = DType::Int64}, &gen);
  std::printf("layer_norm %.1f\n", quartile_us([&] { layer_norm(leaf(x), w, b, 1e-5).backward(g); }, reps));
  std::printf("rms_norm %.1f\n", quartile_us([&] { rms_norm(leaf(x), w, 1e-5).backward(g); }, reps));
  std::printf("softmax %.1f\n", quartile_us([&] { softmax(leaf(x), -1).backward(g); }, reps));
  std::printf("cross_entropy %.1f\n", quartile_us([&] { cross_entropy(leaf(x), targets).backward(); }, reps));
  std::printf("cross_entropy_50257 %.1f\n",
              quartile_us([&] { cross_entropy(leaf(vocab), vocab_targets).backward(); }, std::max(5, reps / 4)));
  return 0;
}
