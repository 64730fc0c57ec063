// Embedding on a GPU against the CPU (label gpu): the gather copies rows, so it is exact;
// the weight gradient sums each row's tokens in token order on both sides (the GPU sorts
// the (index, position) pairs stably, then walks each row's run), so it is bit-equal even
// with many repeated tokens. Outputs are poisoned first; out-of-range indices and mixed
// devices fail naming the op.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "gpu/gpu_test.h"
#include "strata/strata.h"
#include "test_util.h"

namespace strata {
namespace {

using EmbeddingGpu = testing::GpuTest;
using testing::poison;
using testing::same_bits;

struct Case {
  Shape indices;
  int64_t vocab, dim;
};

TEST_F(EmbeddingGpu, ForwardAndBackwardEqualTheCpuBitForBit) {
  // Few rows (many repeats per row), sizes off the block size, a row wider than a block.
  const std::vector<Case> cases = {
      {{4, 33}, 7, 5}, {{8, 128}, 256, 96}, {{3, 50}, 1000, 300}, {{1}, 3, 1}, {{2, 257}, 2, 513}};
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (DType idx_type : {DType::Int32, DType::Int64}) {
      for (const Case& c : cases) {
        Generator gen(21);
        const Tensor idx = randint(0, c.vocab, c.indices, {.dtype = DType::Int64}, &gen).to(idx_type);
        Tensor w = randn({c.vocab, c.dim}, {.dtype = dtype}, &gen);
        Tensor g = randn({idx.numel(), c.dim}, {.dtype = dtype}, &gen);
        g = mul(g, exp(mul(randn(g.shape(), {.dtype = dtype}, &gen), 5.0)));  // magnitudes apart: order shows
        w.set_requires_grad(true);
        Tensor wg = w.detach().to(gpu);
        wg.set_requires_grad(true);
        const Tensor want = embedding(idx, w);
        poison(want.numel(), dtype);
        const Tensor got = embedding(idx.to(gpu), wg);
        EXPECT_TRUE(same_bits(got.to(Device::cpu()), want)) << c.indices << " " << dtype << " " << idx_type;
        sum(mul(want, g.view(want.shape()))).backward();
        poison(w.numel(), dtype);
        sum(mul(got, g.view(want.shape()).to(gpu))).backward();
        EXPECT_TRUE(same_bits(wg.grad().to(Device::cpu()), w.grad())) << c.indices << " " << dtype << " " << idx_type;
      }
    }
  }
}

TEST_F(EmbeddingGpu, Above2To24Elements) {
  // 2^24 + 1024 output elements; few rows, so each row sums thousands of tokens.
  Generator gen(22);
  const int64_t n = (int64_t{1} << 17) + 8, dim = 128;
  const Tensor idx = randint(0, 50, {n}, {.dtype = DType::Int64}, &gen);
  Tensor w = randn({50, dim}, {}, &gen);
  const Tensor g = randn({n, dim}, {}, &gen);
  w.set_requires_grad(true);
  Tensor wg = w.detach().to(gpu);
  wg.set_requires_grad(true);
  const Tensor want = embedding(idx, w);
  const Tensor got = embedding(idx.to(gpu), wg);
  EXPECT_TRUE(same_bits(got.to(Device::cpu()), want));
  sum(mul(want, g)).backward();
  sum(mul(got, g.to(gpu))).backward();
  EXPECT_TRUE(same_bits(wg.grad().to(Device::cpu()), w.grad()));
}

TEST_F(EmbeddingGpu, BadIndicesAndMixedDevices) {
  const Tensor w = randn({10, 4}).to(gpu);
  const Tensor bad = from_vector(std::vector<int64_t>{1, 2, 10, -1}, {2, 2}).to(gpu);
  // The first bad index, its position and the weight's rows, as on the CPU.
  testing::expect_error_mentions([&] { (void)embedding(bad, w); },
                                 {"embedding: index 10 at position [1, 0]", "10 rows", "[10, 4]"});
  const Tensor bad32 = from_vector(std::vector<int32_t>{-3}, {1}).to(gpu);
  testing::expect_error_mentions([&] { (void)embedding(bad32, w); }, {"embedding: index -3", "out of range"});
  const Tensor ok = from_vector(std::vector<int64_t>{1}, {1});
  testing::expect_error_mentions([&] { (void)embedding(ok, w); }, {"embedding", "indices", "weight", "cuda:0", "cpu"});
  // The device is still usable after the error.
  const std::vector<float> all = w.to(Device::cpu()).to_vector<float>();
  EXPECT_EQ(embedding(ok.to(gpu), w).to(Device::cpu()).to_vector<float>(),
            std::vector<float>(all.begin() + 4, all.begin() + 8));
}

}  // namespace
}  // namespace strata
