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

Tensor iota(const Shape& shape, double start = 0) {
  return add(arange(0, shape.numel(), 1, {.dtype = DType::Float32}).view(shape), start);
}

std::vector<Shape> shapes_of(const std::vector<Tensor>& ts) {
  std::vector<Shape> s;
  for (const Tensor& t : ts) s.push_back(t.shape());
  return s;
}

}  // namespace

TEST(Cat, Values) {
  Tensor a = iota({2, 2});      // 0 1 / 2 3
  Tensor b = iota({2, 1}, 10);  // 10 / 11
  Tensor c = iota({1, 2}, 20);  // 20 21
  EXPECT_EQ(cat({a, b}, 1).to_vector<float>(), (std::vector<float>{0, 1, 10, 2, 3, 11}));
  EXPECT_EQ(cat({a, b}, -1).shape(), Shape({2, 3}));
  EXPECT_EQ(cat({a, c}, 0).to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 20, 21}));
  // A transposed (non-contiguous) input and an empty piece.
  EXPECT_EQ(cat({a.transpose(0, 1), zeros({2, 0}), b}, 1).to_vector<float>(), (std::vector<float>{0, 2, 10, 1, 3, 11}));
  // Middle dimension of a 3-D tensor; integer dtypes are copied too.
  Tensor x = arange(0, 8).view({2, 2, 2}), y = arange(100, 104).view({2, 1, 2});
  EXPECT_EQ(cat({x, y}, 1).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 100, 101, 4, 5, 6, 7, 102, 103}));
  Tensor single = cat({a}, 0);
  EXPECT_EQ(single.to_vector<float>(), a.to_vector<float>());
  EXPECT_FALSE(single.is_same(a));
}

TEST(Stack, Values) {
  Tensor a = iota({2, 3}), b = iota({2, 3}, 10);
  Tensor s0 = stack({a, b}, 0);
  EXPECT_EQ(s0.shape(), Shape({2, 2, 3}));
  EXPECT_EQ(s0.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15}));
  Tensor s1 = stack({a, b}, 1);
  EXPECT_EQ(s1.shape(), Shape({2, 2, 3}));
  EXPECT_EQ(s1.to_vector<float>(), (std::vector<float>{0, 1, 2, 10, 11, 12, 3, 4, 5, 13, 14, 15}));
  Tensor s2 = stack({a, b.transpose(0, 1).contiguous().transpose(0, 1)}, -1);
  EXPECT_EQ(s2.shape(), Shape({2, 3, 2}));
  EXPECT_EQ(s2.to_vector<float>(), (std::vector<float>{0, 10, 1, 11, 2, 12, 3, 13, 4, 14, 5, 15}));
}

TEST(Split, ViewsAndSizes) {
  Tensor x = iota({5, 2});
  std::vector<Tensor> p = split(x, 2, 0);
  EXPECT_EQ(shapes_of(p), (std::vector<Shape>{{2, 2}, {2, 2}, {1, 2}}));
  EXPECT_EQ(p[2].to_vector<float>(), (std::vector<float>{8, 9}));
  // Pieces are views: they see writes to x.
  x.fill_(7);
  EXPECT_EQ(p[1].to_vector<float>(), (std::vector<float>{7, 7, 7, 7}));
  EXPECT_EQ(p[1].storage(), x.storage());

  Tensor y = iota({2, 6});
  std::vector<Tensor> q = split(y, std::vector<int64_t>{1, 0, 5}, -1);
  EXPECT_EQ(shapes_of(q), (std::vector<Shape>{{2, 1}, {2, 0}, {2, 5}}));
  EXPECT_EQ(q[0].to_vector<float>(), (std::vector<float>{0, 6}));
  EXPECT_EQ(q[2].to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 7, 8, 9, 10, 11}));
  EXPECT_EQ(shapes_of(split(zeros({0, 3}), 2, 0)), (std::vector<Shape>{{0, 3}}));
  EXPECT_EQ(shapes_of(split(zeros({3}), 5, 0)), (std::vector<Shape>{{3}}));
}

TEST(Chunk, LikeTorch) {
  EXPECT_EQ(shapes_of(chunk(zeros({5}), 3, 0)), (std::vector<Shape>{{2}, {2}, {1}}));
  EXPECT_EQ(shapes_of(chunk(zeros({6}), 4, 0)), (std::vector<Shape>{{2}, {2}, {2}}));
  EXPECT_EQ(shapes_of(chunk(zeros({2}), 5, 0)), (std::vector<Shape>{{1}, {1}}));
  EXPECT_EQ(shapes_of(chunk(zeros({0}), 3, 0)), (std::vector<Shape>{{0}, {0}, {0}}));
  std::vector<Tensor> c = chunk(iota({2, 6}), 3, 1);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[1].to_vector<float>(), (std::vector<float>{2, 3, 8, 9}));
}

TEST(Gradcheck, CatStackSplitChunk) {
  expect_gradients_match(
      [](V in) {
        return cat({in[0], in[1], in[2]}, 1);
      },
      {leaf64({2, 3, 2}, 1), leaf64({2, 1, 2}, 2), leaf64({2, 4, 2}, 3)});
  expect_gradients_match(
      [](V in) {
        return cat({in[0].transpose(0, 1), in[1]}, 0);
      },
      {leaf64({3, 2}, 4), leaf64({1, 3}, 5)});
  expect_gradients_match([](V in) { return stack({in[0], in[1], in[0]}, 1); }, {leaf64({2, 3}, 6), leaf64({2, 3}, 7)});
  // Only some pieces are used: the others contribute zeros.
  expect_gradients_match(
      [](V in) {
        std::vector<Tensor> p = split(in[0], 2, 1);
        return mul(p[0], p[2].narrow(1, 0, 1).expand({3, 2}));
      },
      {leaf64({3, 5}, 8)});
  expect_gradients_match(
      [](V in) {
        std::vector<Tensor> p = split(in[0], std::vector<int64_t>{1, 3}, 0);
        return add(mul(p[1], 2.0), p[0]);
      },
      {leaf64({4, 2}, 9)});
  expect_gradients_match(
      [](V in) {
        std::vector<Tensor> p = chunk(in[0], 3, -1);
        return cat({p[2], p[0]}, 0);
      },
      {leaf64({2, 6}, 10)});
}

TEST(ShapeOps, BackwardSkipsInputsWithoutGrad) {
  Tensor a = leaf64({2, 2}, 1), b = zeros({2, 2}, {.dtype = DType::Float64});
  sum(mul(cat({a, b}, 0), 3.0)).backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{3, 3, 3, 3}));
  EXPECT_FALSE(b.grad().defined());
  EXPECT_FALSE(cat({b, b}, 0).requires_grad());
  EXPECT_FALSE(split(b, 1, 0)[0].requires_grad());
}

TEST(ShapeOps, Errors) {
  Tensor a = zeros({2, 3});
  expect_error_mentions([] { cat({}, 0); }, {"cat", "empty"});
  expect_error_mentions([&] { cat({a, zeros({2, 4})}, 0); }, {"cat", "[2, 4]", "[2, 3]", "dimension 0"});
  expect_error_mentions([&] { cat({a, zeros({2, 3, 1})}, 0); }, {"cat", "[2, 3, 1]"});
  expect_error_mentions([&] { cat({a, zeros({2, 3}, {.dtype = DType::Float64})}, 0); }, {"cat", "dtype"});
  expect_error_mentions([&] { cat({a, a}, 2); }, {"cat", "2"});
  expect_error_mentions([&] { cat({scalar_tensor(1.0), scalar_tensor(2.0)}, 0); }, {"cat", "zero-dimensional"});
  expect_error_mentions([&] { cat({a, Tensor()}, 0); }, {"cat", "undefined"});
  expect_error_mentions([] { stack({}, 0); }, {"stack", "empty"});
  expect_error_mentions([&] { stack({a, zeros({3, 2})}, 0); }, {"stack", "[3, 2]", "[2, 3]"});
  expect_error_mentions([&] { stack({a, a}, 3); }, {"stack"});
  EXPECT_EQ(stack({a, a}, 2).shape(), Shape({2, 3, 2}));
  expect_error_mentions([&] { split(a, std::vector<int64_t>{1, 1}, 1); }, {"split", "[1, 1]", "sum to 2", "3"});
  expect_error_mentions([&] { split(a, std::vector<int64_t>{4, -1}, 1); }, {"split", "negative"});
  expect_error_mentions([&] { split(a, 0, 1); }, {"split", "split_size 0"});
  expect_error_mentions([&] { split(a, 1, 2); }, {"split", "2"});
  expect_error_mentions([&] { split(scalar_tensor(1.0), 1, 0); }, {"split", "zero-dimensional"});
  expect_error_mentions([&] { chunk(a, 0, 0); }, {"chunk", "positive"});
  expect_error_mentions([&] { chunk(a, 2, -3); }, {"chunk"});
}
