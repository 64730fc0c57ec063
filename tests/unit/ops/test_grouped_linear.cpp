// grouped_linear (strata/ops/linalg.h): on the CPU a loop of linear's own GEMM calls, so
// every value, gradient included, equals linear on each group bit for bit; gradients checked
// against finite differences in float64; idle groups get no gradient; bad input named.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "gradcheck.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using strata::testing::expect_error_mentions;
using strata::testing::expect_gradients_match;
using strata::testing::leaf64;
using strata::testing::same_bits;

namespace {

Tensor leaf(const Shape& shape, DType dtype, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, {.dtype = dtype}, &gen).set_requires_grad(true);
}

// Runs grouped_linear and the per-group linear reference (fresh leaves with the same values)
// forward and backward, and expects the same bits in the output and every gradient.
void expect_same_as_linear_per_group(const std::vector<int64_t>& rows, DType x_dtype, DType w_dtype) {
  const int64_t S = std::accumulate(rows.begin(), rows.end(), int64_t{0}), K = 24, N = 40;
  const Tensor x0 = leaf({S, K}, DType::Float64, 1).detach().to(x_dtype);
  std::vector<Tensor> w0;
  for (size_t g = 0; g < rows.size(); ++g) w0.push_back(leaf({N, K}, DType::Float64, 10 + g).detach().to(w_dtype));
  const Tensor gy = leaf({S, N}, DType::Float64, 99).detach().to(x_dtype);

  Tensor x = x0.clone().set_requires_grad(true);
  std::vector<Tensor> w;
  for (const Tensor& t : w0) w.push_back(t.clone().set_requires_grad(true));
  const Tensor y = grouped_linear(x, rows, w);
  y.backward(gy);

  Tensor xr = x0.clone().set_requires_grad(true);
  std::vector<Tensor> wr, parts;
  int64_t first = 0;
  for (size_t g = 0; g < rows.size(); ++g) {
    wr.push_back(w0[g].clone().set_requires_grad(true));
    if (rows[g] > 0) parts.push_back(linear(xr.narrow(0, first, rows[g]), wr[g]));
    first += rows[g];
  }
  const Tensor yr = cat(parts, 0);
  yr.backward(gy);

  EXPECT_TRUE(same_bits(y, yr)) << "output";
  EXPECT_TRUE(same_bits(x.grad(), xr.grad())) << "input gradient";
  for (size_t g = 0; g < rows.size(); ++g) {
    EXPECT_EQ(w[g].grad().defined(), rows[g] > 0) << "group " << g << " has " << rows[g] << " rows";
    if (rows[g] > 0) {
      EXPECT_TRUE(same_bits(w[g].grad(), wr[g].grad())) << "weight gradient " << g;
    }
  }
}

}  // namespace

TEST(GroupedLinear, EqualsLinearPerGroupBitForBit) {
  expect_same_as_linear_per_group({5, 0, 17, 3}, DType::Float32, DType::Float32);
  expect_same_as_linear_per_group({5, 0, 17, 3}, DType::Float64, DType::Float64);
  expect_same_as_linear_per_group({1}, DType::Float32, DType::Float32);
}

TEST(GroupedLinear, SixteenBitWeightsOfAFloat32InputAsLinear) {
  expect_same_as_linear_per_group({4, 9, 0}, DType::Float32, DType::BFloat16);
  expect_same_as_linear_per_group({4, 9, 0}, DType::Float32, DType::Float16);
}

TEST(GroupedLinear, UnderAutocastAsLinear) {
  autocast::Scope bf16;
  expect_same_as_linear_per_group({6, 2, 0, 11}, DType::Float32, DType::Float32);
}

TEST(GroupedLinear, GradientsMatchFiniteDifferences) {
  const std::vector<int64_t> rows{3, 0, 4, 2};
  const Tensor idle = leaf64({5, 6}, 7).detach();  // no rows: no gradient, so not a checked leaf
  expect_gradients_match(
      [&](const std::vector<Tensor>& in) {
        return grouped_linear(in[0], rows, {in[1], idle, in[2], in[3]});
      },
      {leaf64({9, 6}, 1), leaf64({5, 6}, 2), leaf64({5, 6}, 3), leaf64({5, 6}, 4)});
}

TEST(GroupedLinear, NoRowsGivesAnEmptyOutputAndNoGradient) {
  Tensor x = leaf({0, 4}, DType::Float64, 1);
  Tensor w = leaf({3, 4}, DType::Float64, 2);
  const Tensor y = grouped_linear(x, {0}, {w});
  EXPECT_EQ(y.shape(), Shape({0, 3}));
  sum(y).backward();
  EXPECT_EQ(x.grad().shape(), Shape({0, 4}));
  EXPECT_FALSE(w.grad().defined());
}

TEST(GroupedLinear, BadInputIsNamed) {
  const Tensor x = zeros({6, 4}), w = zeros({3, 4});
  expect_error_mentions([&] { grouped_linear(x, {6}, {w, w}); }, {"grouped_linear", "1 row counts for 2 weights"});
  expect_error_mentions([&] { grouped_linear(x, {2, 3}, {w, w}); }, {"sum to 5", "[6, 4]", "6 rows"});
  expect_error_mentions([&] { grouped_linear(x, {7, -1}, {w, w}); }, {"group 1 has -1 rows"});
  expect_error_mentions([&] { grouped_linear(x, {3, 3}, {w, zeros({3, 5})}); }, {"weight 1", "[3, 5]", "[out, 4]"});
  expect_error_mentions([&] { grouped_linear(x, {3, 3}, {w, zeros({2, 4})}); }, {"weight 1", "out = 3"});
  expect_error_mentions([&] { grouped_linear(zeros({6}), {6}, {w}); }, {"input must be [rows, in]", "[6]"});
  expect_error_mentions([&] { grouped_linear(x, {}, {}); }, {"no weights"});
  expect_error_mentions(
      [&] {
        grouped_linear(x, {3, 3}, {w, zeros({3, 4}, {.dtype = DType::Float64})});
      },
      {"weight 1 has dtype float64"});
}
