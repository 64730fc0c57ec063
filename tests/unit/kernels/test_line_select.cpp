// The per-line math of max/argmax, topk and cumsum that the CPU ops and the CUDA kernels
// share (strata_kernels/common/line_select.h): NaN and tie rules, k = 1 and k = n, the bounded
// insertion against a stable sort, cumsum's double accumulation and integer types, and the
// CPU ops equal to those functions line by line (both topk paths: line_topk and the partial
// sort past kSmallTopk).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "strata/strata.h"
#include "strata_kernels/common/line_select.h"
#include "test_util.h"

using strata::testing::same_bits;

namespace {

using strata::DType;
using strata::Shape;
using strata::Tensor;
using strata_kernels::line_cumsum;
using strata_kernels::line_max;
using strata_kernels::line_scatter_add;
using strata_kernels::line_topk;
using strata_kernels::value_before;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// topk written as the contract says: a stable sort by rank (NaN above every number).
template <class T>
std::vector<int64_t> reference_topk(const std::vector<T>& x, int64_t k, bool largest) {
  std::vector<int64_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  auto rank = [&](T v) {  // larger is better when largest
    if (v != v) return largest ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
    return largest ? static_cast<double>(v) : -static_cast<double>(v);
  };
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    const double ra = rank(x[static_cast<size_t>(a)]), rb = rank(x[static_cast<size_t>(b)]);
    // NaN ranks as +-inf: break its tie with a real infinity by NaN-ness.
    const bool na = x[static_cast<size_t>(a)] != x[static_cast<size_t>(a)];
    const bool nb = x[static_cast<size_t>(b)] != x[static_cast<size_t>(b)];
    if (ra != rb) return ra > rb;
    return na != nb && (largest ? na : nb);
  });
  order.resize(static_cast<size_t>(k));
  return order;
}

template <class T>
std::vector<int64_t> run_topk(const std::vector<T>& x, int64_t k, bool largest, std::vector<T>* values = nullptr) {
  std::vector<T> v(static_cast<size_t>(k));
  std::vector<int64_t> ix(static_cast<size_t>(k));
  line_topk(x.data(), static_cast<int64_t>(x.size()), 1, k, largest, v.data(), ix.data(), 1);
  if (values) *values = v;
  return ix;
}

// Dimension `dim` of a 3-d tensor moved last, and back.
Tensor to_last(const Tensor& t, int64_t dim) {
  return t.permute(dim == 0   ? std::vector<int64_t>{1, 2, 0}
                   : dim == 1 ? std::vector<int64_t>{0, 2, 1}
                              : std::vector<int64_t>{0, 1, 2});
}
Tensor from_last(const Tensor& t, int64_t dim) {
  return t.permute(dim == 0   ? std::vector<int64_t>{2, 0, 1}
                   : dim == 1 ? std::vector<int64_t>{0, 2, 1}
                              : std::vector<int64_t>{0, 1, 2});
}

TEST(LineSelect, ValueBeforeRanksNaNAboveEveryNumber) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(value_before(kNaN, inf, true));
  EXPECT_FALSE(value_before(inf, kNaN, true));
  EXPECT_FALSE(value_before(kNaN, kNaN, true));
  EXPECT_FALSE(value_before(kNaN, -inf, false));  // smallest first: NaN last
  EXPECT_TRUE(value_before(-inf, kNaN, false));
  EXPECT_TRUE(value_before(2.0, 1.0, true));
  EXPECT_FALSE(value_before(1.0, 1.0, true));
  EXPECT_TRUE(value_before(int64_t{-3}, int64_t{2}, false));
  EXPECT_FALSE(value_before(int32_t{5}, int32_t{5}, false));
}

TEST(LineSelect, MaxTakesTheFirstOfTiesAndTheFirstNaN) {
  double v = 0;
  int64_t i = -1;
  const std::vector<double> ties = {1, 5, 2, 5, 5};
  line_max(ties.data(), 5, 1, &v, &i);
  EXPECT_EQ(v, 5);
  EXPECT_EQ(i, 1);
  const std::vector<double> nans = {1, 9, kNaN, 10, kNaN};
  line_max(nans.data(), 5, 1, &v, &i);
  EXPECT_TRUE(std::isnan(v));
  EXPECT_EQ(i, 2);
  // Strided: every other element of {3, x, 7, x, 7, x}.
  const std::vector<int32_t> strided = {3, 100, 7, 100, 7, 100};
  int32_t iv = 0;
  line_max(strided.data(), 3, 2, &iv, &i);
  EXPECT_EQ(iv, 7);
  EXPECT_EQ(i, 1);
  const std::vector<float> one = {-2.5f};
  float fv = 0;
  line_max(one.data(), 1, 1, &fv, &i);
  EXPECT_EQ(fv, -2.5f);
  EXPECT_EQ(i, 0);
}

TEST(LineSelect, TopkKeepsTiesInIndexOrderAndNaNFirst) {
  const std::vector<double> x = {3, kNaN, 5, 3, 5, -1, kNaN, 3};
  std::vector<double> v;
  EXPECT_EQ(run_topk(x, 8, true, &v), (std::vector<int64_t>{1, 6, 2, 4, 0, 3, 7, 5}));
  EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1]));
  EXPECT_EQ(v[2], 5);
  EXPECT_EQ(run_topk(x, 8, false), (std::vector<int64_t>{5, 0, 3, 7, 2, 4, 1, 6}));
  EXPECT_EQ(run_topk(x, 1, true), (std::vector<int64_t>{1}));
  EXPECT_EQ(run_topk(x, 1, false), (std::vector<int64_t>{5}));
  EXPECT_EQ(run_topk(x, 4, true), (std::vector<int64_t>{1, 6, 2, 4}));
  EXPECT_TRUE(run_topk(x, 0, true).empty());
}

TEST(LineSelect, TopkEqualsAStableSortOnRandomLinesWithTies) {
  strata::Generator gen(21);
  for (int64_t n : {1, 2, 7, 64, 130}) {
    // Few distinct values (many ties), some NaN.
    std::vector<float> x =
        strata::randint(0, 6, {n}, {.dtype = DType::Int64}, &gen).to(DType::Float32).to_vector<float>();
    for (size_t j = 0; j < x.size(); j += 5) x[j] = std::nanf("");
    std::vector<int64_t> ints(x.size());
    for (size_t j = 0; j < x.size(); ++j) ints[j] = static_cast<int64_t>(j * 7919 % 5);
    for (int64_t k : {int64_t{1}, n / 2, n}) {
      for (bool largest : {true, false}) {
        EXPECT_EQ(run_topk(x, k, largest), reference_topk(x, k, largest)) << "n " << n << " k " << k;
        EXPECT_EQ(run_topk(ints, k, largest), reference_topk(ints, k, largest)) << "n " << n << " k " << k;
      }
    }
  }
}

TEST(LineSelect, CumsumAccumulatesFloatInDoubleAndIntegersInTheirType) {
  // In float, 2^24 + 1 rounds back to 2^24; the double running sum keeps both ones.
  const std::vector<float> x = {16777216.0f, 1.0f, 1.0f};
  std::vector<float> out(3);
  line_cumsum(x.data(), out.data(), 3, 1, false);
  EXPECT_EQ(out, (std::vector<float>{16777216.0f, 16777216.0f, 16777218.0f}));
  line_cumsum(x.data(), out.data(), 3, 1, true);  // suffix sums
  EXPECT_EQ(out, (std::vector<float>{16777218.0f, 2.0f, 1.0f}));
  const std::vector<int32_t> xi = {5, 0, -2, 0, 7, 0};  // stride 2 reads 5, -2, 7
  std::vector<int32_t> oi(6, 99);
  line_cumsum(xi.data(), oi.data(), 3, 2, false);
  EXPECT_EQ(oi, (std::vector<int32_t>{5, 99, 3, 99, 10, 99}));
  const std::vector<int64_t> xl = {int64_t{1} << 40, 1, 2};
  std::vector<int64_t> ol(3);
  line_cumsum(xl.data(), ol.data(), 3, 1, false);
  EXPECT_EQ(ol, (std::vector<int64_t>{int64_t{1} << 40, (int64_t{1} << 40) + 1, (int64_t{1} << 40) + 3}));
}

TEST(LineSelect, ScatterAddPlacesTheGradientAndTurnsMinusZeroToPlusZero) {
  std::vector<double> out(8, 0.0);                  // two lines of 4 interleaved (stride 2)
  const std::vector<int64_t> index = {3, 1, 0, 2};  // k = 2 per line, stride 2
  const std::vector<double> grad = {-0.0, 1.5, 2.5, -4.0};
  line_scatter_add(out.data(), 2, index.data(), grad.data(), 2, 2);              // line 0: index 3, 0
  line_scatter_add(out.data() + 1, 2, index.data() + 1, grad.data() + 1, 2, 2);  // line 1: index 1, 2
  EXPECT_EQ(out, (std::vector<double>{2.5, 0, 0, 1.5, 0, -4.0, 0.0, 0}));
  EXPECT_FALSE(std::signbit(out[6]));  // 0 + -0 = +0, as the CPU's scatter_add
}

// The CPU ops run these functions: equal, bit for bit, to a line-by-line application on
// every dimension of a 3-d tensor (inner > 1 included), for topk on both of its paths.
TEST(LineSelect, CpuOpsEqualTheLineFunctions) {
  strata::Generator gen(22);
  const Tensor x = strata::randn({5, 70, 3}, {.dtype = DType::Float64}, &gen);
  const Tensor xf = strata::mul(x, 1000.0).to(DType::Float32);
  for (int64_t dim = 0; dim < 3; ++dim) {
    const Tensor moved = to_last(xf, dim).contiguous();  // lines last
    const int64_t n = xf.size(dim), lines = xf.numel() / n;
    const float* p = moved.data<float>();
    // cumsum
    std::vector<float> cs(static_cast<size_t>(xf.numel()));
    for (int64_t l = 0; l < lines; ++l) line_cumsum(p + l * n, cs.data() + l * n, n, 1, false);
    const Tensor want_cs = from_last(strata::from_vector(cs, moved.shape()), dim);
    EXPECT_TRUE(same_bits(strata::cumsum(xf, dim), want_cs)) << "dim " << dim;
    // max
    std::vector<float> mv(static_cast<size_t>(lines));
    std::vector<int64_t> mi(static_cast<size_t>(lines));
    for (int64_t l = 0; l < lines; ++l)
      line_max(p + l * n, n, 1, &mv[static_cast<size_t>(l)], &mi[static_cast<size_t>(l)]);
    Shape kept = moved.shape();
    kept[2] = 1;
    const strata::ValuesIndices m = strata::max_with_indices(xf, dim, true);
    EXPECT_TRUE(same_bits(m.values, from_last(strata::from_vector(mv, kept), dim)));
    EXPECT_TRUE(same_bits(m.indices, from_last(strata::from_vector(mi, kept), dim)));
    // topk, k = n (past kSmallTopk where n = 70: the partial sort) and k = 3 (line_topk)
    for (int64_t k : {n, std::min<int64_t>(n, 3)}) {
      std::vector<float> tv(static_cast<size_t>(lines * k));
      std::vector<int64_t> ti(static_cast<size_t>(lines * k));
      for (int64_t l = 0; l < lines; ++l) line_topk(p + l * n, n, 1, k, false, tv.data() + l * k, ti.data() + l * k, 1);
      Shape ks = moved.shape();
      ks[2] = k;
      const strata::ValuesIndices t = strata::topk(xf, k, dim, false);
      EXPECT_TRUE(same_bits(t.values, from_last(strata::from_vector(tv, ks), dim))) << "dim " << dim << " k " << k;
      EXPECT_TRUE(same_bits(t.indices, from_last(strata::from_vector(ti, ks), dim))) << "dim " << dim << " k " << k;
    }
  }
}

// Ties and NaN through the op on both topk paths (k <= 64: line_topk; k > 64: partial sort).
TEST(LineSelect, TopkOpMatchesTheReferenceOnBothPaths) {
  const int64_t n = 150;
  std::vector<double> x(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) x[static_cast<size_t>(j)] = j % 11 == 0 ? kNaN : static_cast<double>(j * 37 % 13);
  const Tensor t = strata::from_vector(x, {n});
  for (int64_t k : {int64_t{1}, int64_t{64}, int64_t{65}, n})
    for (bool largest : {true, false})
      EXPECT_EQ(strata::topk(t, k, 0, largest).indices.to_vector<int64_t>(), reference_topk(x, k, largest))
          << "k " << k << " largest " << largest;
}

}  // namespace
