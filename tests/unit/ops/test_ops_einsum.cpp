// einsum and matmul's batch broadcasting: values against explicit loops, float64
// finite-difference gradients, and the refusals by message.
#include <gtest/gtest.h>

#include <string>

#include "gradcheck.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using strata::testing::expect_error_mentions;
using strata::testing::expect_gradients_match;
using strata::testing::leaf64;
using V = const std::vector<Tensor>&;

namespace {

// max |a - b| over the elements (shapes equal).
double max_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

}  // namespace

TEST(Einsum, ValuesOfTheCommonContractions) {
  const Tensor a = leaf64({3, 4}, 1).detach(), b = leaf64({4, 5}, 2).detach(), v = leaf64({4}, 3).detach();
  // Float64 through the same GEMM or sums in another arrangement: a few ulps of the sums.
  EXPECT_LT(max_diff(einsum("ij,jk->ik", {a, b}), matmul(a, b)), 1e-13);
  EXPECT_LT(max_diff(einsum("ij,jk", {a, b}), matmul(a, b)), 1e-13);  // implicit output "ik"
  EXPECT_LT(max_diff(einsum("ij->ji", {a}), a.transpose(0, 1)), 0.0 + 1e-300);
  EXPECT_LT(max_diff(einsum("ij->", {a}), sum(a)), 1e-13);
  EXPECT_LT(max_diff(einsum("ij->j", {a}), sum(a, {0})), 1e-13);
  EXPECT_LT(max_diff(einsum("i,i->", {v, v}), sum(mul(v, v))), 1e-13);
  EXPECT_LT(max_diff(einsum("i,j->ij", {v, v}), mul(v.unsqueeze(1), v.unsqueeze(0))), 1e-300);
  EXPECT_LT(max_diff(einsum("ij,j->i", {a, v}), matmul(a, v)), 1e-13);
  const Tensor q = leaf64({2, 3, 4, 5}, 4).detach(), k = leaf64({2, 3, 6, 5}, 5).detach();
  EXPECT_LT(max_diff(einsum("bhqd,bhkd->bhqk", {q, k}), matmul(q, k.transpose(-1, -2))), 1e-13);
  EXPECT_LT(max_diff(einsum("bhqd , bhkd -> bhkq", {q, k}), matmul(k, q.transpose(-1, -2))), 1e-13);
  // Implicit output is alphabetical with uppercase first (torch): "aB" -> "Ba".
  EXPECT_EQ(einsum("aB", {a}).shape(), Shape({4, 3}));
  const Tensor sq = leaf64({4, 4}, 6).detach();
  std::vector<double> diag;
  for (int64_t i = 0; i < 4; ++i) diag.push_back(sq.to_vector<double>()[static_cast<size_t>(i * 5)]);
  EXPECT_EQ(einsum("ii->i", {sq}).to_vector<double>(), diag);
  EXPECT_NEAR(einsum("ii", {sq}).item(), diag[0] + diag[1] + diag[2] + diag[3], 1e-14);
}

TEST(Einsum, EllipsisBroadcastsBatchDimensions) {
  const Tensor a = leaf64({2, 1, 3, 4}, 7).detach(), b = leaf64({5, 4, 6}, 8).detach();
  const Tensor out = einsum("...ij,...jk->...ik", {a, b});
  EXPECT_EQ(out.shape(), Shape({2, 5, 3, 6}));
  EXPECT_LT(max_diff(out, matmul(a, b)), 1e-13);
  EXPECT_EQ(einsum("...ij->...ji", {a}).shape(), Shape({2, 1, 4, 3}));
  EXPECT_EQ(einsum("i...->...", {leaf64({3, 2, 4}, 9).detach()}).shape(), Shape({2, 4}));
  EXPECT_EQ(einsum("...ij", {a}).shape(), Shape({2, 1, 3, 4}));
  const Tensor m1 = leaf64({2, 3}, 1).detach(), m2 = leaf64({3, 6}, 2).detach(), m3 = leaf64({6, 2}, 3).detach();
  EXPECT_LT(max_diff(einsum("ij,jk,kl->il", {m1, m2, m3}), matmul(matmul(m1, m2), m3)), 1e-13);
}

TEST(Einsum, GradientsMatchFiniteDifferences) {
  const std::vector<std::pair<std::string, std::vector<Shape>>> cases = {
      {"ij,jk->ik", {{3, 4}, {4, 2}}},
      {"bij,bjk->bik", {{2, 3, 4}, {2, 4, 2}}},
      {"bhqd,bhkd->bhqk", {{2, 2, 3, 4}, {2, 2, 2, 4}}},
      {"ij->ji", {{3, 4}}},
      {"ij->", {{3, 4}}},
      {"i,i->", {{5}, {5}}},
      {"...ij,...jk->...ik", {{2, 1, 3, 4}, {3, 4, 2}}},
      {"ii->i", {{4, 4}}},
      {"ij,jk,k->i", {{2, 3}, {3, 4}, {4}}},
      {"bi,bj->bij", {{2, 3}, {2, 4}}},
  };
  uint64_t seed = 10;
  for (const auto& [eq, shapes] : cases) {
    SCOPED_TRACE(eq);
    std::vector<Tensor> in;
    for (const Shape& s : shapes) in.push_back(leaf64(s, seed++));
    expect_gradients_match([eq = eq](V ops) { return einsum(eq, ops); }, in);
  }
}

TEST(Einsum, Refusals) {
  const Tensor a = zeros({2, 3}), b = zeros({4, 5});
  expect_error_mentions(
      [&] {
        einsum("ij,jk->ik", {a, b});
      },
      {"einsum", "index 'j'", "size 3 in operand 0", "size 4 in operand 1"});
  expect_error_mentions([&] { einsum("ij,jk->ik", {a}); }, {"\"ij,jk->ik\"", "2 operand term(s)", "1 operand(s)"});
  expect_error_mentions([&] { einsum("i#,jk", {a, b}); }, {"\"i#,jk\"", "position 1", "'#'"});
  expect_error_mentions([&] { einsum("ij->ik", {a}); }, {"\"ij->ik\"", "position 5", "'k'", "no input"});
  expect_error_mentions([&] { einsum("ij->ii", {a}); }, {"position 5", "appears twice"});
  expect_error_mentions([&] { einsum("i.j", {a}); }, {"position 1", "\"...\""});
  expect_error_mentions([&] { einsum("ij->i->j", {a}); }, {"position 5", "'-'"});
  expect_error_mentions([&] { einsum("ijk", {a}); }, {"operand 0", "[2, 3]", "names 3"});
  expect_error_mentions([&] { einsum("ii", {a}); }, {"index 'i'", "size 2", "size 3"});
  expect_error_mentions(
      [&] {
        einsum("...i,...i", {zeros({2, 3}), zeros({4, 3})});
      },
      {"dimension 0 of \"...\"", "size 2", "size 4"});
  expect_error_mentions([&] { einsum("ij", {}); }, {"einsum: no operands"});
  expect_error_mentions([&] { einsum("i", {from_vector(std::vector<int64_t>{1}, {1})}); }, {"einsum", "int64"});
}

TEST(MatmulBroadcast, BatchDimensionsBroadcastAsTorch) {
  const Tensor a = leaf64({2, 1, 3, 4}, 20).detach(), b = leaf64({5, 4, 6}, 21).detach();
  const Tensor out = matmul(a, b);
  ASSERT_EQ(out.shape(), Shape({2, 5, 3, 6}));
  // Each [i, j] matrix is a 2-D product of the broadcast operands' matrices.
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 5; ++j)
      EXPECT_LT(max_diff(out.select(0, i).select(0, j), matmul(a.select(0, i).select(0, 0), b.select(0, j))), 1e-13);
  EXPECT_EQ(matmul(leaf64({1, 3, 4}, 1).detach(), leaf64({2, 1, 4, 5}, 2).detach()).shape(), Shape({2, 1, 3, 5}));
  EXPECT_EQ(matmul(leaf64({4}, 1).detach(), leaf64({2, 3, 4, 5}, 2).detach()).shape(), Shape({2, 3, 5}));
  EXPECT_EQ(matmul(leaf64({3, 1, 2, 4}, 1).detach(), leaf64({4}, 2).detach()).shape(), Shape({3, 1, 2}));
  expect_error_mentions(
      [] {
        matmul(zeros({2, 3, 4}), zeros({3, 4, 5}));
      },
      {"matmul", "batch dimensions", "[2]", "[3]"});
}

TEST(MatmulBroadcast, GradientsReduceToEachOperandsShape) {
  expect_gradients_match([](V in) { return matmul(in[0], in[1]); }, {leaf64({2, 1, 3, 4}, 1), leaf64({5, 4, 2}, 2)});
  expect_gradients_match([](V in) { return matmul(in[0], in[1]); }, {leaf64({1, 3, 4}, 3), leaf64({2, 2, 4, 3}, 4)});
  expect_gradients_match([](V in) { return matmul(in[0], in[1]); }, {leaf64({4}, 5), leaf64({2, 4, 3}, 6)});
  expect_gradients_match([](V in) { return matmul(in[0], in[1]); }, {leaf64({3, 1, 2, 4}, 7), leaf64({1, 2, 4, 2}, 8)});
}
