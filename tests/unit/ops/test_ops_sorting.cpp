// sort / argsort / nonzero / bincount: values and indices (ties, NaN, -0, empty tensors,
// every dtype), the float64 finite-difference gradient of sort's values and bincount's
// weights, and the refusals by message.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "gradcheck.h"
#include "strata/strata.h"
#include "strata_kernels/common/sort_key.h"
#include "test_util.h"

using namespace strata;
using strata::testing::expect_error_mentions;
using strata::testing::expect_gradients_match;
using strata::testing::leaf64;
using V = const std::vector<Tensor>&;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor f64(const std::vector<double>& v, const Shape& shape) { return from_vector(v, shape); }
Tensor i64(const std::vector<int64_t>& v) { return from_vector(v, {static_cast<int64_t>(v.size())}); }

// Values compared bit for bit as doubles, NaN equal to NaN.
void expect_same(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i;
    } else {
      EXPECT_EQ(got[i], want[i]) << "element " << i;
    }
  }
}

}  // namespace

TEST(Sort, StableTiesInBothDirections) {
  const Tensor x = f64({2, 1, 2, 0, 1, 2}, {6});
  ValuesIndices up = sort(x);
  EXPECT_EQ(up.values.to_vector<double>(), (std::vector<double>{0, 1, 1, 2, 2, 2}));
  EXPECT_EQ(up.indices.to_vector<int64_t>(), (std::vector<int64_t>{3, 1, 4, 0, 2, 5}));
  EXPECT_EQ(up.indices.dtype(), DType::Int64);
  ValuesIndices down = sort(x, 0, /*descending=*/true);
  EXPECT_EQ(down.values.to_vector<double>(), (std::vector<double>{2, 2, 2, 1, 1, 0}));
  EXPECT_EQ(down.indices.to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 5, 1, 4, 3}));
  // stable=false returns the same (stable) answer.
  EXPECT_EQ(sort(x, 0, false, false).indices.to_vector<int64_t>(), up.indices.to_vector<int64_t>());
  EXPECT_EQ(argsort(x, -1, true).to_vector<int64_t>(), down.indices.to_vector<int64_t>());
}

TEST(Sort, NaNInfAndSignedZeroAsPyTorch) {
  const Tensor x = f64({kNaN, 1, -kInf, -0.0, kInf, 0.0, -kNaN, -2}, {8});
  ValuesIndices up = sort(x);
  expect_same(up.values.to_vector<double>(), {-kInf, -2, -0.0, 0.0, 1, kInf, kNaN, kNaN});
  EXPECT_EQ(up.indices.to_vector<int64_t>(), (std::vector<int64_t>{2, 7, 3, 5, 1, 4, 0, 6}));
  EXPECT_TRUE(std::signbit(up.values.to_vector<double>()[2]));  // -0 keeps its input order before +0
  ValuesIndices down = sort(x.to(DType::Float32), 0, true);
  EXPECT_EQ(down.indices.to_vector<int64_t>(), (std::vector<int64_t>{0, 6, 4, 1, 3, 5, 7, 2}));
}

TEST(Sort, KeysOrderEveryDtype) {
  // The shared key (the CUDA radix sort's) is monotone across the whole range.
  using strata_kernels::sort_key;
  const std::vector<float> f = {-std::numeric_limits<float>::infinity(), -3.5f, -1e-30f, 0.0f, 1e-30f, 2.0f,
                                std::numeric_limits<float>::infinity()};
  for (size_t i = 1; i < f.size(); ++i) EXPECT_LT(sort_key(f[i - 1]), sort_key(f[i])) << i;
  EXPECT_EQ(sort_key(-0.0), sort_key(0.0));
  EXPECT_EQ(sort_key(kNaN), sort_key(-kNaN));
  EXPECT_LT(sort_key(kInf), sort_key(kNaN));
  EXPECT_LT(sort_key(int64_t{-5}), sort_key(int64_t{3}));
  EXPECT_LT(sort_key(std::numeric_limits<int32_t>::min()), sort_key(int32_t{-1}));
  EXPECT_EQ(sort(from_vector(std::vector<int32_t>{3, -7, 0}, {3})).values.to_vector<int32_t>(),
            (std::vector<int32_t>{-7, 0, 3}));
}

TEST(Sort, AlongAnyDimensionAndEmpty) {
  const Tensor x = f64({3, 1, 2, 0, 5, 4}, {2, 3});
  ValuesIndices cols = sort(x.transpose(0, 1), 1);  // rows of the transposed view: (3, 0), (1, 5), (2, 4)
  EXPECT_EQ(cols.values.to_vector<double>(), (std::vector<double>{0, 3, 1, 5, 2, 4}));
  ValuesIndices d0 = sort(x, 0, true);
  EXPECT_EQ(d0.values.to_vector<double>(), (std::vector<double>{3, 5, 4, 0, 1, 2}));
  EXPECT_EQ(d0.indices.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 1, 1, 0, 0}));
  EXPECT_EQ(sort(zeros({3, 0})).values.shape(), Shape({3, 0}));
  EXPECT_EQ(sort(zeros({0, 4}), 0).indices.shape(), Shape({0, 4}));
  ValuesIndices s = sort(scalar_tensor(7.0));
  EXPECT_EQ(s.values.shape(), Shape({}));
  EXPECT_EQ(s.indices.item(), 0);
}

TEST(Sort, GradientFlowsBackThroughTheIndices) {
  expect_gradients_match([](V in) { return sort(in[0], 1).values; }, {leaf64({3, 5}, 1)});
  expect_gradients_match([](V in) { return sort(in[0], 0, true).values; }, {leaf64({4, 3}, 2)});
  // With ties the gradient follows the indices: each input position gets its own output's.
  Tensor x = f64({1, 1, 0}, {3}).set_requires_grad(true);
  sum(mul(sort(x).values, f64({10, 20, 30}, {3}))).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{20, 30, 10}));
}

TEST(Sort, Refusals) {
  expect_error_mentions([] { sort(zeros({2, 3}), 2); }, {"sort", "dimension 2"});
  expect_error_mentions([] { sort(zeros({2}, {.dtype = DType::BFloat16})); }, {"sort", "bfloat16"});
  expect_error_mentions([] { sort(Tensor()); }, {"sort: input is undefined"});
}

TEST(Nonzero, CoordinatesInRowMajorOrder) {
  const Tensor x = f64({0, 1.5, 0, kNaN, 0, -2}, {2, 3});
  const Tensor nz = nonzero(x);
  EXPECT_EQ(nz.dtype(), DType::Int64);
  EXPECT_EQ(nz.shape(), Shape({3, 2}));
  EXPECT_EQ(nz.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 1, 0, 1, 2}));  // NaN counts
  EXPECT_EQ(nonzero(zeros({2, 3})).shape(), Shape({0, 2}));
  EXPECT_EQ(nonzero(zeros({0, 3, 2})).shape(), Shape({0, 3}));
  EXPECT_EQ(nonzero(scalar_tensor(3.0)).shape(), Shape({1, 0}));
  EXPECT_EQ(nonzero(scalar_tensor(0.0)).shape(), Shape({0, 0}));
  EXPECT_EQ(nonzero(gt(f64({1, -1, 2}, {3}), 0.0)).to_vector<int64_t>(), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(nonzero(i64({0, 4, 0, 7})).to_vector<int64_t>(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(nonzero(f64({0, 1, 2, 0}, {2, 2}).transpose(0, 1)).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 1, 1, 0}));  // a transposed view: [[0, 2], [1, 0]]
  expect_error_mentions([] { nonzero(Tensor()); }, {"nonzero: input is undefined"});
}

TEST(Bincount, CountsAndWeights) {
  const Tensor x = i64({1, 3, 1, 0, 3, 3});
  EXPECT_EQ(bincount(x).to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 0, 3}));
  EXPECT_EQ(bincount(x).dtype(), DType::Int64);
  EXPECT_EQ(bincount(x, {}, 6).to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 0, 3, 0, 0}));
  EXPECT_EQ(bincount(i64({}), {}, 0).shape(), Shape({0}));
  EXPECT_EQ(bincount(i64({}), {}, 2).to_vector<int64_t>(), (std::vector<int64_t>{0, 0}));
  const Tensor w = from_vector(std::vector<float>{0.5f, 1, 2, 4, 8, 16}, {6});
  const Tensor s = bincount(x, w);
  EXPECT_EQ(s.dtype(), DType::Float32);
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{4, 2.5f, 0, 25}));
}

TEST(Bincount, GradientInWeights) {
  const Tensor x = i64({2, 0, 2, 4});
  expect_gradients_match([&x](V in) { return bincount(x, in[0], 6); }, {leaf64({4}, 3)});
}

TEST(Bincount, Refusals) {
  expect_error_mentions([] { bincount(i64({2, 0, -3, 1})); }, {"bincount", "negative value -3", "position 2"});
  expect_error_mentions([] { bincount(from_vector(std::vector<int32_t>{1}, {1})); }, {"bincount", "int32", "int64"});
  expect_error_mentions([] { bincount(from_vector(std::vector<int64_t>{1, 2}, {1, 2})); }, {"bincount", "1-D"});
  expect_error_mentions([] { bincount(i64({1, 2}), zeros({3})); }, {"bincount: weights", "[3]", "[2]"});
  expect_error_mentions([] { bincount(i64({1}), {}, -1); }, {"bincount: minlength", "-1"});
  expect_error_mentions([] { bincount(i64({1}), i64({1})); }, {"bincount: weights", "int64", "float32 or float64"});
}
