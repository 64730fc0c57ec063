// tril / triu (batched, diagonal offsets, every dtype, bit-exact copies, masked gradients)
// and one_hot (values, inferred classes, errors naming the value and its position).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gradcheck.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using strata::testing::expect_error_mentions;
using strata::testing::expect_gradients_match;
using strata::testing::leaf64;
using V = const std::vector<Tensor>&;

namespace {

// 1 where tril (lower) or triu with `diagonal` keeps (r, c) of a rows x cols matrix.
std::vector<double> mask(int64_t rows, int64_t cols, int64_t diagonal, bool lower) {
  std::vector<double> m;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) m.push_back((lower ? c - r <= diagonal : c - r >= diagonal) ? 1.0 : 0.0);
  return m;
}

}  // namespace

TEST(Triangle, DiagonalOffsets) {
  const Tensor x = ones({3, 4});
  EXPECT_EQ(tril(x).to_vector<double>(), (std::vector<double>{1, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 0}));
  EXPECT_EQ(triu(x).to_vector<double>(), (std::vector<double>{1, 1, 1, 1, 0, 1, 1, 1, 0, 0, 1, 1}));
  EXPECT_EQ(tril(x, -1).to_vector<double>(), (std::vector<double>{0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0}));
  EXPECT_EQ(triu(x, 2).to_vector<double>(), (std::vector<double>{0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0}));
  for (int64_t d : {-5, -2, 0, 1, 3, 7}) {
    EXPECT_EQ(tril(x, d).to_vector<double>(), mask(3, 4, d, true)) << "tril diagonal " << d;
    EXPECT_EQ(triu(x, d).to_vector<double>(), mask(3, 4, d, false)) << "triu diagonal " << d;
  }
  // Offsets far past the matrix keep everything or nothing, without overflow.
  const int64_t big = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(tril(x, big).to_vector<double>(), std::vector<double>(12, 1.0));
  EXPECT_EQ(triu(x, big).to_vector<double>(), std::vector<double>(12, 0.0));
}

TEST(Triangle, BatchedStridedAndEmpty) {
  // Each of the batch's matrices is masked the same way; values come through unchanged.
  const Tensor x = arange(1, 25, 1, {.dtype = DType::Float64}).view({2, 3, 4});
  const std::vector<double> m = mask(3, 4, 1, true), v = x.to_vector<double>();
  const std::vector<double> got = tril(x, 1).to_vector<double>();
  for (size_t i = 0; i < 24; ++i) EXPECT_EQ(got[i], m[i % 12] * v[i]) << i;
  // A transposed view: the triangle of the transposed matrix.
  const Tensor t = arange(0, 6, 1, {.dtype = DType::Float32}).view({2, 3}).transpose(0, 1);  // [[0,3],[1,4],[2,5]]
  EXPECT_EQ(triu(t).to_vector<float>(), (std::vector<float>{0, 3, 0, 4, 0, 0}));
  EXPECT_EQ(tril(zeros({0, 3})).shape(), Shape({0, 3}));
  EXPECT_EQ(triu(zeros({2, 0, 4}), 1).shape(), Shape({2, 0, 4}));
}

TEST(Triangle, CopiesBitsOfEveryDtype) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // NaN above the diagonal becomes 0 (a mask, not a product); -0.0 below keeps its sign.
  const std::vector<double> got = tril(from_vector(std::vector<double>{1, nan, -0.0, 2}, {2, 2})).to_vector<double>();
  EXPECT_EQ(got[1], 0.0);
  EXPECT_TRUE(std::signbit(got[2]));
  EXPECT_EQ(tril(from_vector(std::vector<int64_t>{1, 2, 3, 4}, {2, 2})).to_vector<int64_t>(),
            (std::vector<int64_t>{1, 0, 3, 4}));
  const Tensor b = triu(gt(ones({2, 2}), 0.0));
  EXPECT_EQ(b.dtype(), DType::Bool);
  EXPECT_EQ(b.to_vector<double>(), (std::vector<double>{1, 1, 0, 1}));
  const Tensor h = tril(full({2, 2}, 1.5, {.dtype = DType::BFloat16}), -1);
  EXPECT_EQ(h.dtype(), DType::BFloat16);
  EXPECT_EQ(h.to_vector<float>(), (std::vector<float>{0, 0, 1.5f, 0}));
}

TEST(Triangle, GradientIsMaskedTheSameWay) {
  Tensor x = leaf64({2, 3, 3}, 51);
  sum(mul(triu(x, 1), 2.0)).backward();
  const std::vector<double> m = mask(3, 3, 1, false), g = x.grad().to_vector<double>();
  for (size_t i = 0; i < 18; ++i) EXPECT_EQ(g[i], 2.0 * m[i % 9]) << i;
  for (int64_t d : {-1, 0, 2}) {
    expect_gradients_match([d](V in) { return tril(in[0], d); }, {leaf64({2, 3, 4}, 52)});
    expect_gradients_match([d](V in) { return triu(in[0], d); }, {leaf64({4, 3}, 53)});
  }
  expect_gradients_match([](V in) { return tril(in[0].transpose(0, 1)); }, {leaf64({3, 4}, 54)});
}

TEST(Triangle, Errors) {
  expect_error_mentions([] { (void)tril(ones({3})); }, {"tril", "[3]", "1 dimension", "at least 2"});
  expect_error_mentions([] { (void)triu(scalar_tensor(1.0)); }, {"triu", "[]", "at least 2"});
}

TEST(OneHot, ValuesAndInferredClasses) {
  const Tensor idx = from_vector(std::vector<int64_t>{0, 2, 1, 0}, {2, 2});
  const Tensor h = one_hot(idx);  // num_classes -1: max + 1 = 3
  EXPECT_EQ(h.dtype(), DType::Int64);
  EXPECT_EQ(h.shape(), Shape({2, 2, 3}));
  EXPECT_EQ(h.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 0, 0, 1, 0, 1, 0, 1, 0, 0}));
  EXPECT_EQ(one_hot(idx, 4).shape(), Shape({2, 2, 4}));
  EXPECT_EQ(one_hot(idx.transpose(0, 1), 3).to_vector<int64_t>(),
            (std::vector<int64_t>{1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0}));
  EXPECT_EQ(one_hot(scalar_tensor(2.0, {.dtype = DType::Int64})).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 1}));
  EXPECT_EQ(one_hot(zeros({0}, {.dtype = DType::Int64}), 5).shape(), Shape({0, 5}));
}

TEST(OneHot, Errors) {
  const Tensor idx = from_vector(std::vector<int64_t>{0, 1, -1, 2}, {2, 2});
  expect_error_mentions([&] { (void)one_hot(idx, 3); }, {"one_hot", "index -1", "position [1, 0]", "negative"});
  const Tensor big = from_vector(std::vector<int64_t>{0, 1, 2, 3}, {2, 2});
  expect_error_mentions([&] { (void)one_hot(big, 3); },
                        {"one_hot", "index 3", "position [1, 1]", "num_classes = 3", "[2, 2]"});
  expect_error_mentions([] { (void)one_hot(zeros({0}, {.dtype = DType::Int64})); },
                        {"one_hot", "empty", "num_classes"});
  expect_error_mentions([] { (void)one_hot(zeros({2}, {.dtype = DType::Int32}), 3); }, {"one_hot", "int32", "int64"});
  expect_error_mentions([] { (void)one_hot(zeros({2})); }, {"one_hot", "float32", "int64"});
  expect_error_mentions([&] { (void)one_hot(big, 0); }, {"one_hot", "num_classes = 0", "positive"});
  expect_error_mentions([&] { (void)one_hot(big, -2); }, {"one_hot", "num_classes = -2"});
}
