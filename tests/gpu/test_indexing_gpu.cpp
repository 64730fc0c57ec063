// index_select and index_add on a GPU against the CPU (label gpu), and nn::MoE, whose token
// dispatch and combine they are, forward and backward on CUDA against the same module on the
// CPU. index_select moves bytes, so it is exact for every dtype; index_add sums each
// destination's sources in increasing position on both devices (the GPU sorts the index
// stably, then walks each run), so it is bit-equal even where the order shows in the float32
// bits; an out-of-range index fails with the CPU's own message. Outputs are poisoned first.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gpu/derived_bounds.h"
#include "gpu/gpu_test.h"
#include "strata/strata.h"
#include "test_util.h"

namespace strata {
namespace {

using IndexingGpu = testing::GpuTest;
using testing::poison;
using testing::same_bits;

Tensor longs(const std::vector<int64_t>& v) { return from_vector(v, {static_cast<int64_t>(v.size())}); }

// m entries in [0, n): m / 3 rows (as far as n allows), each named about 3 times, apart.
Tensor repeated_index(int64_t n, int64_t m) {
  std::vector<int64_t> idx;
  for (int64_t j = 0; j < m; ++j) idx.push_back((j % std::max<int64_t>(m / 3, 1) * 7 + 3) % n);
  return longs(idx);
}

// float32 values of magnitudes e^-28 to e^28 and both signs: a sum's bits depend on its order.
Tensor spread(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return mul(randn(shape, {}, &gen), exp(mul(randn(shape, {}, &gen), 7.0)));
}

TEST_F(IndexingGpu, IndexSelectEqualsTheCpuBitForBit) {
  const Shape shape{6, 7, 300};  // rows of 300: more than a block; 7 * 300 off the block size
  for (int64_t dim : {0, 1, -1}) {
    const Tensor idx = repeated_index(shape[static_cast<size_t>(dim < 0 ? dim + 3 : dim)], 13);
    for (DType dtype : {DType::Float32, DType::Float64, DType::BFloat16, DType::Int64}) {
      const Tensor x = mul(randn(shape, {.dtype = DType::Float64}), 100.0).to(dtype);
      const Tensor want = index_select(x, dim, idx);
      poison((want.numel() * static_cast<int64_t>(dtype_size(dtype)) + 7) / 8, DType::Float64);
      for (DType idx_type : {DType::Int64, DType::Int32}) {
        const Tensor got = index_select(x.to(gpu), dim, idx.to(idx_type).to(gpu));
        EXPECT_EQ(got.device(), gpu);
        EXPECT_TRUE(same_bits(got.to(Device::cpu()), want)) << "dim " << dim << " " << dtype << " " << idx_type;
      }
    }
  }
  // A strided input (a transpose) and an empty index.
  const Tensor x = randn({5, 8}).transpose(0, 1);
  const Tensor idx = longs({4, 0, 4});
  EXPECT_TRUE(same_bits(index_select(x.to(gpu), 1, idx.to(gpu)).to(Device::cpu()), index_select(x, 1, idx)));
  EXPECT_EQ(index_select(x.to(gpu), 0, longs({}).to(gpu)).shape(), (Shape{0, 5}));
}

TEST_F(IndexingGpu, IndexAddEqualsTheCpuBitForBit) {
  const Shape shape{5, 6, 130};
  for (int64_t dim : {0, 1, -1}) {
    const int64_t d = dim < 0 ? dim + 3 : dim, m = 40;
    const Tensor idx = repeated_index(shape[static_cast<size_t>(d)], m);
    Shape src_shape = shape;
    src_shape[static_cast<size_t>(d)] = m;
    // float32 into a non-zero input, values whose sums depend on their order.
    const Tensor x = spread(shape, 1), src = spread(src_shape, 2);
    const Tensor want = index_add(x, dim, idx, src);
    poison(want.numel(), DType::Float32);
    const Tensor got = index_add(x.to(gpu), dim, idx.to(gpu), src.to(gpu));
    EXPECT_TRUE(same_bits(got.to(Device::cpu()), want)) << "float32, dim " << dim;
    // The same pairs in the opposite order give other bits: the comparison sees the order.
    std::vector<int64_t> rev = idx.to_vector<int64_t>(), back(static_cast<size_t>(m));
    std::reverse(rev.begin(), rev.end());
    for (int64_t j = 0; j < m; ++j) back[static_cast<size_t>(j)] = m - 1 - j;
    EXPECT_FALSE(same_bits(index_add(x, dim, longs(rev), index_select(src, dim, longs(back))), want))
        << "dim " << dim << ": the values do not test the order";
    for (DType dtype : {DType::Float64, DType::Int32, DType::Int64}) {
      const Tensor xd = mul(randn(shape, {.dtype = DType::Float64}), 1000.0).to(dtype);
      const Tensor sd = mul(randn(src_shape, {.dtype = DType::Float64}), 1000.0).to(dtype);
      EXPECT_TRUE(
          same_bits(index_add(xd.to(gpu), dim, idx.to(gpu), sd.to(gpu)).to(Device::cpu()), index_add(xd, dim, idx, sd)))
          << dtype << ", dim " << dim;
    }
  }
}

TEST_F(IndexingGpu, ManyTokensOnFewRows) {
  // 2^17 + 8 sources on 50 rows of 128: each destination sums thousands, in order.
  const int64_t m = (int64_t{1} << 17) + 8;
  Generator gen(5);
  const Tensor idx = randint(0, 50, {m}, {.dtype = DType::Int64}, &gen);
  const Tensor x = spread({50, 128}, 6), src = spread({m, 128}, 7);
  EXPECT_TRUE(
      same_bits(index_add(x.to(gpu), 0, idx.to(gpu), src.to(gpu)).to(Device::cpu()), index_add(x, 0, idx, src)));
}

TEST_F(IndexingGpu, BackwardsEqualTheCpuBitForBit) {
  const Shape shape{4, 9, 33};
  for (int64_t dim : {0, 1, -1}) {
    const int64_t d = dim < 0 ? dim + 3 : dim, m = 17;
    const Tensor idx = repeated_index(shape[static_cast<size_t>(d)], m);
    Shape picked = shape;
    picked[static_cast<size_t>(d)] = m;
    const Tensor x = spread(shape, 11), src = spread(picked, 12), w = spread(picked, 13), v = spread(shape, 14);
    // index_select's gradient is an index_add into zeros (repeats sum, in order).
    Tensor xc = x.clone().set_requires_grad(true), xg = x.to(gpu).set_requires_grad(true);
    sum(mul(index_select(xc, dim, idx), w)).backward();
    sum(mul(index_select(xg, dim, idx.to(gpu)), w.to(gpu))).backward();
    EXPECT_TRUE(same_bits(xg.grad().to(Device::cpu()), xc.grad())) << "index_select backward, dim " << dim;
    // index_add's: the gradient itself for the input, an index_select of it for src.
    Tensor ac = x.clone().set_requires_grad(true), ag = x.to(gpu).set_requires_grad(true);
    Tensor sc = src.clone().set_requires_grad(true), sg = src.to(gpu).set_requires_grad(true);
    sum(mul(index_add(ac, dim, idx, sc), v)).backward();
    sum(mul(index_add(ag, dim, idx.to(gpu), sg), v.to(gpu))).backward();
    EXPECT_TRUE(same_bits(ag.grad().to(Device::cpu()), ac.grad())) << "index_add input gradient, dim " << dim;
    EXPECT_TRUE(same_bits(sg.grad().to(Device::cpu()), sc.grad())) << "index_add src gradient, dim " << dim;
  }
}

TEST_F(IndexingGpu, OutOfRangeIndexGivesTheCpuMessage) {
  const Tensor x = randn({3, 5});
  const Tensor bad = longs({1, 5, -1, 2});
  const std::string select_cpu = testing::error_of([&] { (void)index_select(x, 1, bad); });
  const std::string select_gpu = testing::error_of([&] { (void)index_select(x.to(gpu), 1, bad.to(gpu)); });
  const std::string text =
      "index_select: index 5 at position [1] of index (shape [4]) is out of range for dimension 1 of size 5 "
      "(input shape [3, 5])";
  EXPECT_NE(select_cpu.find(text), std::string::npos) << select_cpu;
  EXPECT_NE(select_gpu.find(text), std::string::npos) << select_gpu;
  EXPECT_THROW((void)index_select(x.to(gpu), 0, longs({3}).to(gpu)), Error);
  const Tensor src = randn({3, 4});
  const std::string add_gpu = testing::error_of([&] { (void)index_add(x.to(gpu), 1, bad.to(gpu), src.to(gpu)); });
  EXPECT_NE(add_gpu.find("index_add: index 5 at position [1] of index (shape [4]) is out of range for dimension 1"),
            std::string::npos)
      << add_gpu;
  // Nothing to move (rows of zero elements), yet the index is still checked, as on the CPU.
  const Tensor empty_rows = zeros({3, 0});
  testing::expect_error_mentions([&] { (void)index_select(empty_rows.to(gpu), 0, longs({7}).to(gpu)); },
                                 {"index_select: index 7 at position [0]", "dimension 0 of size 3"});
  // Unsupported dtypes for the sum and mixed devices name the op.
  testing::expect_error_mentions(
      [&] {
        (void)index_add(x.to(DType::BFloat16).to(gpu), 1, longs({0}).to(gpu),
                        zeros({3, 1}).to(DType::BFloat16).to(gpu));
      },
      {"index_add", "bfloat16"});
  testing::expect_error_mentions([&] { (void)index_select(x.to(gpu), 1, longs({0})); }, {"index_select", "index"});
}

// nn::MoE forward and backward on CUDA against the CPU, float64, within moe_float64_bound
// (derived_bounds.h: the GEMMs' summation order, exp and log differ; the routing is equal).
constexpr int64_t kTokens = 16, kC = 8, kI = 6;

struct MoERun {
  Tensor y, aux, dx;
  std::vector<std::pair<std::string, Tensor>> grads;  // undefined: no gradient (an idle expert)
  nn::MoEStats stats;
};

MoERun run_moe(const nn::MoEConfig& config, Device device) {
  Generator init(7), data(8);
  auto moe = std::make_shared<nn::MoE>(
      config,
      nn::InitOptions{.std = 0.5, .dtype = DType::Float64, .gen = &init, .linear_init = nn::LinearInit::Normal});
  moe->to(device);
  const Tensor x0 = randn({kTokens, kC}, {.dtype = DType::Float64}, &data);
  const Tensor w = randn({kTokens, kC}, {.dtype = DType::Float64}, &data);
  Tensor x = x0.to(device).detach().set_requires_grad(true);
  const Tensor y = moe->forward(x);
  const Tensor aux = moe->auxiliary_loss();
  add(sum(mul(y, w.to(device))), aux).backward();
  MoERun r{.y = y.detach().to(Device::cpu()),
           .aux = aux.detach().to(Device::cpu()),
           .dx = x.grad().to(Device::cpu()),
           .grads = {},
           .stats = moe->stats()};
  for (auto& [name, p] : moe->named_parameters()) {
    EXPECT_EQ(p.device(), device) << name;
    r.grads.emplace_back(name, p.grad().defined() ? p.grad().to(Device::cpu()) : Tensor());
  }
  return r;
}

TEST_F(IndexingGpu, MoEForwardAndBackwardMatchTheCpu) {
  struct Case {
    const char* name;
    nn::MoEGating gating;
    std::optional<double> capacity_factor;
    bool grouped;  // the experts as grouped GEMMs (cuBLAS grouped on CUDA) or one by one
  };
  const std::vector<Case> cases = {{"capacity 0.5 (drops)", nn::MoEGating::Softmax, 0.5, true},
                                   {"dropless", nn::MoEGating::Softmax, std::nullopt, true},
                                   {"dropless, one expert after another", nn::MoEGating::Softmax, std::nullopt, false},
                                   {"sigmoid, capacity 0.75", nn::MoEGating::Sigmoid, 0.75, true}};
  for (const Case& c : cases) {
    const nn::MoEConfig config{.hidden_size = kC,
                               .intermediate_size = kI,
                               .num_experts = 4,
                               .top_k = 2,
                               .gating = c.gating,
                               .capacity_factor = c.capacity_factor,
                               .aux_loss_coef = 0.3,
                               .z_loss_coef = 0.2,
                               .grouped_experts = c.grouped};
    const MoERun cpu = run_moe(config, Device::cpu());
    const MoERun got = run_moe(config, gpu);
    if (c.capacity_factor) {
      EXPECT_GT(cpu.stats.dropped, 0) << c.name << ": no slot dropped, capacity untested";
    }
    // The routing is integers: equal, or the comparison below would be of different graphs.
    ASSERT_EQ(got.stats.tokens_per_expert, cpu.stats.tokens_per_expert) << c.name;
    ASSERT_EQ(got.stats.kept_per_expert, cpu.stats.kept_per_expert) << c.name;
    ASSERT_EQ(got.stats.dropped, cpu.stats.dropped) << c.name;
    const double bound = testing::moe_float64_bound();
    EXPECT_LE(testing::max_relative(got.y, cpu.y), bound) << c.name << ": output";
    EXPECT_LE(testing::max_relative(got.aux, cpu.aux), bound) << c.name << ": auxiliary loss";
    EXPECT_LE(testing::max_relative(got.dx, cpu.dx), bound) << c.name << ": input gradient";
    ASSERT_EQ(got.grads.size(), cpu.grads.size());
    for (size_t i = 0; i < cpu.grads.size(); ++i) {
      const auto& [name, want] = cpu.grads[i];
      ASSERT_EQ(got.grads[i].first, name);
      ASSERT_EQ(got.grads[i].second.defined(), want.defined()) << c.name << ": gradient presence of " << name;
      if (want.defined()) {
        EXPECT_LE(testing::max_relative(got.grads[i].second, want), bound) << c.name << ": gradient of " << name;
      }
    }
  }
}

}  // namespace
}  // namespace strata
