// The sum's fixed order (strata_kernels/common/dim_reduce.h), which the CPU sum and the CUDA sum
// share: the CPU sum equals a literal emulation of the lanes bit for bit, on every layout
// (reduced block leading, middle, trailing, split, transposed input), for any thread count;
// the one-thread replay the CUDA column kernel runs (dim_reduce_serial) gives the same bits.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "gradcheck.h"
#include "strata/strata.h"
#include "strata_kernels/common/dim_reduce.h"

namespace {

using strata::DType;
using strata::Shape;
using strata::Tensor;
constexpr int L = strata_kernels::kDimReduceLanes;

// The order written out: L lanes in an array, strided adds, then the halving.
template <class T, class Acc>
T emulate(const std::vector<T>& v) {
  std::vector<Acc> lanes(L, Acc(0));
  for (size_t k = 0; k < v.size(); ++k) lanes[k % L] += static_cast<Acc>(v[k]);
  for (int s = L / 2; s > 0; s /= 2)
    for (int t = 0; t < s; ++t) lanes[t] += lanes[t + s];
  return static_cast<T>(lanes[0]);
}

// Values of very different magnitudes, so that another order would round differently.
Tensor spread(const Shape& shape, DType dtype, uint64_t seed) {
  strata::Generator gen(seed);
  Tensor a = strata::randn(shape, {.dtype = DType::Float64}, &gen);
  Tensor b = strata::randn(shape, {.dtype = DType::Float64}, &gen);
  return strata::mul(a, strata::exp(strata::mul(b, 6.0))).to(dtype);
}

template <class T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// Every output of sum(x, dims) against the emulation over its reduced elements, taken in
// row-major order of the reduced dimensions.
template <class T, class Acc>
void check_against_emulation(const Tensor& x, const std::vector<int64_t>& dims) {
  const Tensor out = strata::sum(x, dims, /*keepdim=*/true).contiguous();
  const std::vector<T> got = out.to_vector<T>();
  // Move the reduced dimensions last: each output's elements are then one contiguous row.
  std::vector<bool> red(x.shape().size(), false);
  for (int64_t d : dims) red[static_cast<size_t>(d)] = true;
  std::vector<int64_t> order;
  for (size_t d = 0; d < red.size(); ++d)
    if (!red[d]) order.push_back(static_cast<int64_t>(d));
  for (size_t d = 0; d < red.size(); ++d)
    if (red[d]) order.push_back(static_cast<int64_t>(d));
  const std::vector<T> all = x.permute(order).contiguous().to_vector<T>();
  const size_t n = got.empty() ? 0 : all.size() / got.size();
  for (size_t i = 0; i < got.size(); ++i) {
    const std::vector<T> row(all.begin() + static_cast<std::ptrdiff_t>(i * n),
                             all.begin() + static_cast<std::ptrdiff_t>((i + 1) * n));
    const T want = emulate<T, Acc>(row);
    ASSERT_TRUE(same_bits(got[i], want)) << "output " << i << " of shape " << x.shape() << ": " << got[i] << " vs "
                                         << want;
    const T serial = static_cast<T>(strata_kernels::dim_reduce_serial(row.data(), static_cast<int64_t>(n), 1));
    ASSERT_TRUE(same_bits(serial, want)) << "serial replay, output " << i;
  }
}

struct Case {
  Shape shape;
  std::vector<int64_t> dims;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {{1000, 96}, {0}},          // bias gradient: reduced rows, kept columns (inner > 1)
      {{7, 133}, {1}},            // rows (inner == 1), n not a multiple of the lanes
      {{3, 77, 5}, {1}},          // middle block
      {{4, 6, 5, 3}, {1, 2}},     // middle block of two
      {{4, 6, 5}, {0, 2}},        // split: permuted copy
      {{2, 1, 9, 1}, {1, 2, 3}},  // size-1 dimensions inside the block
      {{5, 3}, {0}},              // n < lanes
      {{40000}, {0}},             // one long row
      {{2, 3}, {}},               // nothing reduced
  };
  return c;
}

TEST(DimReduce, SumEqualsTheLaneOrderFloat32) {
  for (const Case& c : cases()) check_against_emulation<float, double>(spread(c.shape, DType::Float32, 1), c.dims);
}

TEST(DimReduce, SumEqualsTheLaneOrderFloat64) {
  for (const Case& c : cases()) check_against_emulation<double, double>(spread(c.shape, DType::Float64, 2), c.dims);
}

TEST(DimReduce, SumEqualsTheLaneOrderIntegers) {
  Tensor x = strata::arange(0, 3 * 70 * 4, 1, {.dtype = DType::Int64}).view({3, 70, 4});
  check_against_emulation<int64_t, int64_t>(x, {1});
  check_against_emulation<int32_t, int32_t>(x.to(DType::Int32), {0, 2});
}

TEST(DimReduce, TransposedInputGivesTheSameBits) {
  Tensor x = spread({300, 50}, DType::Float32, 3);
  Tensor xt = x.transpose(0, 1).contiguous().transpose(0, 1);  // same values, column-major
  EXPECT_EQ(strata::sum(x, {0}).to_vector<float>(), strata::sum(xt, {0}).to_vector<float>());
  EXPECT_EQ(strata::sum(x, {1}).to_vector<float>(), strata::sum(xt, {1}).to_vector<float>());
}

TEST(DimReduce, IndependentOfTheThreadCount) {
  const int saved = omp_get_max_threads();
  std::vector<std::vector<float>> results;
  Tensor x = spread({512, 300}, DType::Float32, 4);
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    std::vector<float> r = strata::sum(x, {0}).to_vector<float>();
    const std::vector<float> rows = strata::sum(x, {1}).to_vector<float>();
    r.insert(r.end(), rows.begin(), rows.end());
    results.push_back(r);
  }
  omp_set_num_threads(saved);
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

TEST(DimReduce, EmptyAndZeroSigns) {
  // An empty reduction is +0; a sum of -0s is +0, as the plain sum from +0 gave.
  EXPECT_EQ(strata::sum(strata::zeros({0, 3}), {0}).to_vector<float>(), (std::vector<float>{0, 0, 0}));
  const double s = strata::sum(strata::full({40}, -0.0)).item();
  EXPECT_FALSE(std::signbit(s));
  // NaN and infinity propagate.
  Tensor x = strata::zeros({70});
  x = strata::add(x, strata::from_vector(std::vector<float>(70, 1.0f), {70}));
  EXPECT_EQ(strata::sum(x).item(), 70.0);
  Tensor n = strata::from_vector(std::vector<float>{1, NAN, 2}, {3});
  EXPECT_TRUE(std::isnan(strata::sum(n).item()));
}

TEST(DimReduce, Gradcheck) {
  using V = const std::vector<Tensor>&;
  // A fresh leaf per check: the harness reads x.grad, which backward accumulates into.
  auto leaf = [] {
    strata::Generator gen(7);
    Tensor x = strata::randn({4, 37, 3}, {.dtype = DType::Float64}, &gen);
    x.set_requires_grad(true);
    return x;
  };
  strata::testing::expect_gradients_match([](V in) { return strata::sum(in[0], {1}); }, {leaf()});
  strata::testing::expect_gradients_match([](V in) { return strata::mean(in[0], {0, 2}); }, {leaf()});
  strata::testing::expect_gradients_match([](V in) { return strata::sum_to(in[0], {37, 1}); }, {leaf()});
}

}  // namespace
