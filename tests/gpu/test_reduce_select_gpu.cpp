// max / max_with_indices / argmax, topk and cumsum on a GPU against the CPU (label gpu): both
// run strata_kernels/common/line_select.h, one line at a time, so values and indices are equal bit
// for bit, on every dimension of several shapes, strided views, lengths that are not a
// multiple of the block, and once above 2^24 elements; gradients too (max and topk scatter
// the gradient back, cumsum's is a suffix sum). Outputs are poisoned with NaN before each
// launch. Last, generate() with a tiny GPT on CUDA picks the CPU's tokens, greedy and sampled.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "gpu/gpu_test.h"
#include "strata/strata.h"

namespace strata {
namespace {

using ReduceSelectGpu = testing::GpuTest;
using testing::same_bits;

// Random values of `dtype` with many ties (few distinct values) and, for floating types,
// some NaN: the tie and NaN rules are exercised everywhere.
Tensor tied(const Shape& shape, DType dtype, uint64_t seed) {
  Generator gen(seed);
  Tensor x = randint(-4, 5, shape, {.dtype = DType::Int64}, &gen).to(DType::Float64);
  if (is_floating(dtype)) {
    x = add(x, mul(randn(shape, {.dtype = DType::Float64}, &gen), 1e-3 * (seed % 2)));  // odd seeds: no ties
    Tensor u = rand(shape, {.dtype = DType::Float64}, &gen);
    x = where(lt(u, 0.01), full(shape, std::nan(""), {.dtype = DType::Float64}), x);
  }
  return x.to(dtype);
}

// Values spreading over many magnitudes: a prefix sum in another order rounds differently.
Tensor spread(const Shape& shape, DType dtype, uint64_t seed) {
  Generator gen(seed);
  Tensor a = randn(shape, {.dtype = DType::Float64}, &gen);
  Tensor b = randn(shape, {.dtype = DType::Float64}, &gen);
  return mul(a, exp(mul(b, 6.0))).to(dtype);
}

// Poisons blocks for an output of `dtype` and for int64 indices of numel elements (integer
// outputs get floating NaN of their size: the caching allocator reuses blocks by bytes).
void poison(int64_t numel, DType dtype) {
  const DType same_size = dtype_size(dtype) == 4 ? DType::Float32 : DType::Float64;
  testing::poison(numel, same_size);
  testing::poison(numel, DType::Float64);
}

std::string describe(const Shape& shape, DType dtype, int64_t dim) {
  std::ostringstream os;
  os << "shape " << shape << " " << dtype << " dim " << dim;
  return os.str();
}

Tensor host(const Tensor& t) { return t.to(Device::cpu()); }

// Every op along `dim` of the CPU tensor x and of xg (its copy on the GPU, maybe a view).
void expect_same_as_cpu(const Tensor& x, const Tensor& xg, int64_t dim, const std::string& what) {
  const int64_t n = x.size(dim);
  const ValuesIndices m = max_with_indices(x, dim, true);
  poison(m.values.numel(), x.dtype());
  const ValuesIndices mg = max_with_indices(xg, dim, true);
  EXPECT_EQ(mg.values.device(), xg.device());
  EXPECT_TRUE(same_bits(host(mg.values), m.values)) << what << " max values";
  EXPECT_TRUE(same_bits(host(mg.indices), m.indices)) << what << " max indices";
  EXPECT_TRUE(same_bits(host(argmax(xg, dim)), argmax(x, dim))) << what << " argmax";
  for (int64_t k : {int64_t{1}, std::min<int64_t>(n, 5), n}) {
    for (bool largest : {true, false}) {
      const ValuesIndices t = topk(x, k, dim, largest);
      poison(t.values.numel(), x.dtype());
      const ValuesIndices tg = topk(xg, k, dim, largest);
      EXPECT_TRUE(same_bits(host(tg.values), t.values)) << what << " topk k " << k << " largest " << largest;
      EXPECT_TRUE(same_bits(host(tg.indices), t.indices)) << what << " topk k " << k << " largest " << largest;
    }
  }
  const Tensor c = cumsum(x, dim);
  poison(c.numel(), x.dtype());
  EXPECT_TRUE(same_bits(host(cumsum(xg, dim)), c)) << what << " cumsum";
}

TEST_F(ReduceSelectGpu, MaxTopkCumsumEqualTheCpuBitForBit) {
  const std::vector<Shape> shapes = {{1}, {7}, {300}, {5, 257}, {33, 3, 70}, {2, 3, 4, 5}, {1000, 9}};
  uint64_t seed = 100;
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int32, DType::Int64}) {
    for (const Shape& shape : shapes) {
      const Tensor x = tied(shape, dtype, ++seed);
      const Tensor xg = x.to(gpu);
      for (int64_t dim = 0; dim < x.dim(); ++dim) expect_same_as_cpu(x, xg, dim, describe(shape, dtype, dim));
    }
    // Strided views on the device: a transpose and a step.
    const Tensor x = tied({40, 30}, dtype, ++seed);
    const Tensor xg = x.to(gpu);
    for (int64_t dim = 0; dim < 2; ++dim) {
      expect_same_as_cpu(x.transpose(0, 1), xg.transpose(0, 1), dim, "transposed " + describe(x.shape(), dtype, dim));
      expect_same_as_cpu(x.narrow(1, 3, 20), xg.narrow(1, 3, 20), dim, "narrowed " + describe(x.shape(), dtype, dim));
    }
  }
  // cumsum on magnitudes where any other summation order shows.
  for (DType dtype : {DType::Float32, DType::Float64}) {
    const Tensor x = spread({17, 1031}, dtype, 7);
    for (int64_t dim = 0; dim < 2; ++dim)
      EXPECT_TRUE(same_bits(host(cumsum(x.to(gpu), dim)), cumsum(x, dim))) << "spread cumsum dim " << dim;
  }
}

TEST_F(ReduceSelectGpu, Above2To24Elements) {
  const int64_t rows = ((int64_t{1} << 24) + 5 * 7) / 5;  // rows * 5 > 2^24
  const Tensor x = spread({rows, 5}, DType::Float32, 8);
  const Tensor xg = x.to(gpu);
  for (int64_t dim = 0; dim < 2; ++dim) {
    const ValuesIndices m = max_with_indices(x, dim);
    const ValuesIndices mg = max_with_indices(xg, dim);
    EXPECT_TRUE(same_bits(host(mg.values), m.values)) << "dim " << dim;
    EXPECT_TRUE(same_bits(host(mg.indices), m.indices)) << "dim " << dim;
    const ValuesIndices t = topk(x, 3, dim);
    const ValuesIndices tg = topk(xg, 3, dim);
    EXPECT_TRUE(same_bits(host(tg.values), t.values)) << "dim " << dim;
    EXPECT_TRUE(same_bits(host(tg.indices), t.indices)) << "dim " << dim;
    poison(x.numel(), DType::Float32);
    EXPECT_TRUE(same_bits(host(cumsum(xg, dim)), cumsum(x, dim))) << "dim " << dim;
  }
}

TEST_F(ReduceSelectGpu, GradientsEqualTheCpu) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    const Tensor x = tied({6, 9, 4}, dtype, 31);
    const Tensor up = spread({6, 9, 4}, dtype, 32);
    for (int64_t dim = 0; dim < 3; ++dim) {
      // f(x) = sum(op(x) * weights) with fixed weights, so every picked entry gets its own gradient.
      auto grads = [&](Device device, auto&& op) {
        Tensor leaf = x.to(device).detach();
        leaf.set_requires_grad(true);
        const Tensor out = op(leaf);
        sum(mul(out, up.narrow(dim, 0, out.size(dim)).to(device))).backward();
        return host(leaf.grad());
      };
      auto max_op = [&](const Tensor& t) { return max(t, dim, true); };
      auto topk_op = [&](const Tensor& t) { return topk(t, std::min<int64_t>(3, t.size(dim)), dim, false).values; };
      auto cumsum_op = [&](const Tensor& t) { return cumsum(t, dim); };
      EXPECT_TRUE(same_bits(grads(gpu, max_op), grads(Device::cpu(), max_op))) << dtype << " max dim " << dim;
      EXPECT_TRUE(same_bits(grads(gpu, topk_op), grads(Device::cpu(), topk_op))) << dtype << " topk dim " << dim;
      EXPECT_TRUE(same_bits(grads(gpu, cumsum_op), grads(Device::cpu(), cumsum_op))) << dtype << " cumsum dim " << dim;
    }
  }
}

// generate() with the model on CUDA: the logits come from the GPU (a GEMM order of its own,
// float64 here so the margins dwarf that), the tokens are the CPU's.
TEST_F(ReduceSelectGpu, GenerateOnCudaPicksTheCpuTokens) {
  nn::GPT model(
      nn::GPTConfig{.vocab_size = 31, .context = 16, .n_layer = 2, .n_head = 2, .n_embd = 16, .dtype = DType::Float64});
  const Tensor prompt = from_vector(std::vector<int64_t>{3, 1, 4, 1, 5, 9}, {2, 3});
  const std::vector<nn::GenerateOptions> options = {
      {.greedy = true},
      {.temperature = 0.8, .top_k = 5, .seed = 7},
      {.temperature = 1.2, .top_p = 0.9, .seed = 8},
      {.seed = 9, .use_cache = false},
  };
  std::vector<Tensor> want;
  for (const nn::GenerateOptions& o : options) want.push_back(nn::generate(model, prompt, 8, o));
  model.to(gpu);
  for (size_t i = 0; i < options.size(); ++i) {
    const Tensor got = nn::generate(model, prompt, 8, options[i]);
    EXPECT_EQ(got.device(), Device::cpu());
    EXPECT_EQ(got.to_vector<int64_t>(), want[i].to_vector<int64_t>()) << "options " << i;
    const Tensor on_gpu = nn::generate(model, prompt.to(gpu), 8, options[i]);
    EXPECT_EQ(on_gpu.device(), gpu);
    EXPECT_EQ(host(on_gpu).to_vector<int64_t>(), want[i].to_vector<int64_t>()) << "options " << i << " (prompt on GPU)";
  }
}

}  // namespace
}  // namespace strata
