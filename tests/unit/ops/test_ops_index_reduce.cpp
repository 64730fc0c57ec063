// index_select / index_add / gather / scatter_add, max / argmax / topk / var / mean / cumsum
// along a dimension: values, float64 finite-difference gradients, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "gradcheck.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using strata::testing::expect_error_mentions;
using strata::testing::expect_gradients_match;
using strata::testing::expect_near_vec;
using strata::testing::leaf64;
using V = const std::vector<Tensor>&;

namespace {

Tensor iota(const Shape& shape, DType dtype = DType::Float32) {
  return arange(0, shape.numel(), 1, {.dtype = dtype}).view(shape);
}
Tensor idx64(const std::vector<int64_t>& v, const Shape& shape) { return from_vector(v, shape); }
Tensor idx64(const std::vector<int64_t>& v) { return from_vector(v, {static_cast<int64_t>(v.size())}); }
Tensor f32(const std::vector<float>& v, const Shape& shape) { return from_vector(v, shape); }

}  // namespace

TEST(IndexSelect, Values) {
  Tensor x = iota({3, 4});  // rows 0..3, 4..7, 8..11
  EXPECT_EQ(index_select(x, 0, idx64({2, 0, 2})).to_vector<float>(),
            (std::vector<float>{8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11}));
  Tensor cols = index_select(x, -1, from_vector(std::vector<int32_t>{3, 1}, {2}));
  EXPECT_EQ(cols.shape(), Shape({3, 2}));
  EXPECT_EQ(cols.to_vector<float>(), (std::vector<float>{3, 1, 7, 5, 11, 9}));
  // A transposed view, an integer dtype, an empty index.
  EXPECT_EQ(index_select(x.transpose(0, 1), 1, idx64({1})).to_vector<float>(), (std::vector<float>{4, 5, 6, 7}));
  EXPECT_EQ(index_select(iota({2, 2}, DType::Int64), 1, idx64({1, 1})).to_vector<int64_t>(),
            (std::vector<int64_t>{1, 1, 3, 3}));
  EXPECT_EQ(index_select(x, 0, idx64({})).shape(), Shape({0, 4}));
}

TEST(IndexAdd, Values) {
  Tensor x = zeros({2, 3});
  Tensor out = index_add(x, 1, idx64({2, 0, 2}), f32({1, 2, 3, 4, 5, 6}, {2, 3}));
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{2, 0, 4, 5, 0, 10}));
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>(6, 0.0f)));  // out of place
}

TEST(Gather, Values) {
  Tensor x = iota({3, 4});
  EXPECT_EQ(gather(x, 1, idx64({3, 0, 1, 1, 0, 2}, {3, 2})).to_vector<float>(),
            (std::vector<float>{3, 0, 5, 5, 8, 10}));
  // Along dimension 0, with an index smaller than x in dimension 1.
  EXPECT_EQ(gather(x, 0, idx64({2, 1, 0, 0}, {2, 2})).to_vector<float>(), (std::vector<float>{8, 5, 0, 1}));
  // A transposed (non-contiguous) input: xt[i][j] = x[j][i].
  EXPECT_EQ(gather(x.transpose(0, 1), -1, idx64({2, 0}, {2, 1})).to_vector<float>(), (std::vector<float>{8, 1}));
  EXPECT_EQ(gather(iota({2, 3}, DType::Int32), 1, idx64({2, 2}, {2, 1})).to_vector<int32_t>(),
            (std::vector<int32_t>{2, 5}));
}

TEST(ScatterAdd, Values) {
  Tensor x = ones({2, 3});
  Tensor src = f32({10, 20, 30, 40, 50, 60}, {2, 3});
  // index [[0, 0], [2, 1]] along dim 1 uses src's first two columns; duplicates accumulate.
  Tensor out = scatter_add(x, 1, idx64({0, 0, 2, 1}, {2, 2}), src);
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{31, 1, 1, 1, 51, 41}));
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>(6, 1.0f)));
  Tensor col = scatter_add(zeros({3, 1}), 0, idx64({1, 1}, {2, 1}), src.transpose(0, 1));
  EXPECT_EQ(col.to_vector<float>(), (std::vector<float>{0, 30, 0}));  // src^T[0][0] + src^T[1][0]
}

TEST(Gradcheck, IndexOps) {
  // Repeated indices: their gradients accumulate.
  expect_gradients_match([](V in) { return index_select(in[0], 1, idx64({2, 0, 2, 2})); }, {leaf64({3, 4}, 1)});
  expect_gradients_match(
      [](V in) {
        return index_select(in[0].transpose(0, 1), 0, idx64({1, 1}));
      },
      {leaf64({3, 4}, 2)});
  expect_gradients_match(
      [](V in) {
        return index_add(in[0], 0, idx64({1, 1, 0}), in[1]);
      },
      {leaf64({2, 3}, 3), leaf64({3, 3}, 4)});
  expect_gradients_match([](V in) { return gather(in[0], 1, idx64({0, 0, 3, 2, 2, 2}, {2, 3})); }, {leaf64({3, 4}, 5)});
  expect_gradients_match(
      [](V in) {
        return gather(in[0].transpose(0, 1), 0, idx64({2, 2, 0, 1}, {2, 2}));
      },
      {leaf64({3, 4}, 6)});
  // src larger than the index: its unused entries get zero gradient.
  expect_gradients_match(
      [](V in) {
        return scatter_add(in[0], 0, idx64({2, 0, 2, 2}, {2, 2}), in[1]);
      },
      {leaf64({3, 2}, 7), leaf64({3, 3}, 8)});
  expect_gradients_match(
      [](V in) {
        return scatter_add(in[0], -1, idx64({1, 1, 0, 1, 1, 1}, {2, 3}), in[1].transpose(0, 1));
      },
      {leaf64({2, 2}, 9), leaf64({3, 2}, 10)});
}

TEST(IndexOps, Errors) {
  Tensor x = zeros({3, 5});
  expect_error_mentions(
      [&] {
        gather(x, 1, idx64({0, 7, 1}, {1, 3}));
      },
      {"gather: index 7", "position [0, 1]", "dimension 1 of size 5", "[3, 5]"});
  expect_error_mentions([&] { index_select(x, 0, idx64({0, -1})); }, {"index_select: index -1", "of size 3"});
  expect_error_mentions([&] { index_select(x, 0, idx64({3})); }, {"index_select: index 3", "of size 3", "[3, 5]"});
  expect_error_mentions(
      [&] {
        scatter_add(x, 0, idx64({4}, {1, 1}), ones({1, 1}));
      },
      {"scatter_add: index 4", "dimension 0 of size 3"});
  expect_error_mentions([&] { index_add(x, 1, idx64({5}), ones({3, 1})); }, {"index_add: index 5", "size 5"});
  expect_error_mentions([&] { index_select(x, 0, f32({0}, {1})); }, {"index_select", "float32", "int64"});
  expect_error_mentions([&] { gather(x, 0, zeros({1, 1}, {.dtype = DType::Float64})); }, {"gather", "dtype"});
  expect_error_mentions([&] { index_select(x, 0, idx64({0, 0}, {1, 2})); }, {"index_select", "1-D", "[1, 2]"});
  expect_error_mentions([&] { index_select(x, 2, idx64({0})); }, {"index_select", "dimension 2"});
  expect_error_mentions([&] { gather(x, -3, idx64({0}, {1, 1})); }, {"gather", "dimension -3"});
  expect_error_mentions(
      [&] {
        gather(x, 0, idx64({0, 0, 0, 0, 0, 0}, {1, 6}));
      },
      {"gather", "[1, 6]", "[3, 5]", "dimension 1"});
  expect_error_mentions([&] { gather(x, 0, idx64({0})); }, {"gather", "[1]", "[3, 5]", "number of dimensions"});
  expect_error_mentions(
      [&] {
        scatter_add(x, 0, idx64({0, 0}, {1, 2}), ones({1, 1}));
      },
      {"scatter_add", "[1, 2]", "src", "[1, 1]"});
  expect_error_mentions(
      [&] {
        scatter_add(x, 0, idx64({0}, {1, 1}), ones({1, 1}, {.dtype = DType::Float64}));
      },
      {"scatter_add", "src has dtype float64", "float32"});
  expect_error_mentions(
      [&] {
        index_add(x, 0, idx64({0}), ones({1, 4}));
      },
      {"index_add", "[1, 4]", "[3, 5]", "[1, 5]"});
  expect_error_mentions([&] { gather(scalar_tensor(1.0), 0, idx64({0})); }, {"gather", "zero-dimensional"});
}

TEST(MaxTopk, ValuesIndicesAndTies) {
  Tensor x = f32({1, 5, 5, 2, 7, 0, 7, 3}, {2, 4});
  ValuesIndices m = max_with_indices(x, 1);
  EXPECT_EQ(m.values.to_vector<float>(), (std::vector<float>{5, 7}));
  EXPECT_EQ(m.indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));  // first of the ties
  ValuesIndices k = max_with_indices(x, -2, true);
  EXPECT_EQ(k.values.shape(), Shape({1, 4}));
  EXPECT_EQ(k.indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 1, 1}));
  EXPECT_EQ(argmax(x, 1, true).shape(), Shape({2, 1}));

  ValuesIndices t = topk(x, 3, 1);
  EXPECT_EQ(t.values.to_vector<float>(), (std::vector<float>{5, 5, 2, 7, 7, 3}));
  EXPECT_EQ(t.indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 0, 2, 3}));
  ValuesIndices s = topk(x, 2, 0, /*largest=*/false);
  EXPECT_EQ(s.values.shape(), Shape({2, 4}));
  EXPECT_EQ(s.values.to_vector<float>(), (std::vector<float>{1, 0, 5, 2, 7, 5, 7, 3}));
  EXPECT_EQ(topk(x, 0, 1).values.shape(), Shape({2, 0}));
  // NaN ranks above every number, as in torch.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor with_nan = f32({1, nan, 3}, {3});
  EXPECT_EQ(topk(with_nan, 1, 0).indices.to_vector<int64_t>(), (std::vector<int64_t>{1}));
  EXPECT_EQ(topk(with_nan, 2, 0, false).indices.to_vector<int64_t>(), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(topk(iota({2, 3}, DType::Int64), 1, 1).values.to_vector<int64_t>(), (std::vector<int64_t>{2, 5}));
}

TEST(Gradcheck, MaxTopk) {
  expect_gradients_match([](V in) { return max_with_indices(in[0], 0, true).values; }, {leaf64({3, 4}, 11)});
  expect_gradients_match([](V in) { return topk(in[0], 2, 1).values; }, {leaf64({3, 4}, 12)});
  expect_gradients_match([](V in) { return topk(in[0].transpose(0, 1), 3, 0, false).values; }, {leaf64({2, 4}, 13)});
}

TEST(VarMean, Values) {
  Tensor x = from_vector(std::vector<double>{1, 2, 4, 3, 3, 3}, {2, 3});
  expect_near_vec(var(x, {1}).to_vector<double>(), {7.0 / 3, 0.0}, 1e-15);
  expect_near_vec(var(x, {1}, {.correction = 0}).to_vector<double>(), {14.0 / 9, 0.0}, 1e-15);
  expect_near_vec(var(x, {0}).to_vector<double>(), {2, 0.5, 0.5}, 1e-15);
  EXPECT_EQ(var(x, {-1}, {.keepdim = true}).shape(), Shape({2, 1}));
  expect_near_vec({var(x).item()}, {48.0 / 45}, 1e-15);  // mean 8/3, sum of squares 48/9
  expect_near_vec(mean(x, {-1}, true).to_vector<double>(), {7.0 / 3, 3.0}, 1e-15);
  // No degrees of freedom left: a positive sum of squares over 0 is inf, 0/0 (one element,
  // unbiased) NaN, as in torch.
  EXPECT_TRUE(std::isinf(var(x, {0, 1}, {.correction = 6}).item()));
  EXPECT_TRUE(std::isnan(var(ones({1, 2}), {0}).to_vector<float>()[0]));
}

TEST(Gradcheck, VarMeanCumsum) {
  expect_gradients_match([](V in) { return var(in[0], {1}); }, {leaf64({3, 4}, 14)});
  expect_gradients_match(
      [](V in) {
        return var(in[0], {0, 2}, {.correction = 0, .keepdim = true});
      },
      {leaf64({2, 3, 2}, 15)});
  expect_gradients_match([](V in) { return mean(in[0], {-1}, true); }, {leaf64({3, 4}, 16)});
  expect_gradients_match([](V in) { return cumsum(in[0], 0); }, {leaf64({4, 3}, 17)});
  expect_gradients_match([](V in) { return cumsum(in[0].transpose(0, 1), -1); }, {leaf64({4, 3}, 18)});
}

TEST(Cumsum, Values) {
  Tensor x = iota({2, 3});
  EXPECT_EQ(cumsum(x, 1).to_vector<float>(), (std::vector<float>{0, 1, 3, 3, 7, 12}));
  EXPECT_EQ(cumsum(x, 0).to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 5, 7}));
  EXPECT_EQ(cumsum(x.transpose(0, 1), 1).to_vector<float>(), (std::vector<float>{0, 3, 1, 5, 2, 7}));
  EXPECT_EQ(cumsum(iota({3}, DType::Int32), 0).to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 3}));
}

TEST(ReduceAlongDim, Errors) {
  Tensor x = zeros({2, 3});
  expect_error_mentions([&] { topk(x, 4, 1); }, {"topk", "k = 4", "dimension 1 of size 3", "[2, 3]"});
  expect_error_mentions([&] { topk(x, -1, 1); }, {"topk", "k = -1"});
  expect_error_mentions([&] { topk(x, 1, 2); }, {"topk", "dimension 2"});
  expect_error_mentions([&] { max(zeros({2, 0}), 1); }, {"max", "[2, 0]", "empty"});
  expect_error_mentions([&] { argmax(x, -3); }, {"argmax", "dimension -3"});
  expect_error_mentions([&] { var(x, {1, 1}); }, {"var", "listed twice"});
  expect_error_mentions([&] { var(iota({3}, DType::Int64), {0}); }, {"var", "int64"});
  expect_error_mentions([&] { cumsum(x, 2); }, {"cumsum", "dimension 2"});
  expect_error_mentions([&] { cumsum(scalar_tensor(1.0), 0); }, {"cumsum", "zero-dimensional"});
}

// cat / stack / split / chunk beyond tests/unit/ops/test_shape_ops.cpp: negative dimensions and
// uneven pieces as torch gives them.
TEST(ShapeOps, NegativeDimsAndUnevenPieces) {
  Tensor x = iota({2, 7});
  std::vector<Tensor> c = chunk(x, 3, -1);  // ceil(7 / 3) = 3: sizes 3, 3, 1
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[2].shape(), Shape({2, 1}));
  EXPECT_EQ(chunk(x, 4, -1).size(), 4u);         // 2, 2, 2, 1
  EXPECT_EQ(chunk(iota({5}), 4, 0).size(), 3u);  // 2, 2, 1: fewer than asked, as torch
  std::vector<Tensor> s = split(x, 5, -1);
  EXPECT_EQ(s[1].to_vector<float>(), (std::vector<float>{5, 6, 12, 13}));
  EXPECT_EQ(stack({x, x}, -3).shape(), Shape({2, 2, 7}));
  EXPECT_EQ(stack({x, x}, -1).shape(), Shape({2, 7, 2}));
  EXPECT_EQ(cat({x, x}, -2).shape(), Shape({4, 7}));
  expect_gradients_match([](V in) { return stack({in[0], in[1]}, -1); }, {leaf64({2, 3}, 19), leaf64({2, 3}, 20)});
  expect_gradients_match([](V in) { return split(in[0], 2, -2)[1]; }, {leaf64({5, 2}, 21)});
}
