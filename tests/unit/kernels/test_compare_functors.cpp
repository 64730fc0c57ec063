// strata_kernels/common/compare_ops.h, the functors the CPU comparisons/selections and the CUDA
// kernels (kernels/cuda/compare.cu) both run: checked here value by value, with the cases
// where a careless select or compare would differ (NaN, -0.0, NaN payloads, bool operands,
// integer extremes).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "strata_kernels/common/compare_ops.h"

namespace {

namespace k = strata_kernels;
using k::CompareCode;

template <class T>
bool cmp(CompareCode c, T a, T b) {
  switch (c) {
    case CompareCode::Eq: return k::CompareFn<T, CompareCode::Eq>{}(a, b);
    case CompareCode::Ne: return k::CompareFn<T, CompareCode::Ne>{}(a, b);
    case CompareCode::Lt: return k::CompareFn<T, CompareCode::Lt>{}(a, b);
    case CompareCode::Le: return k::CompareFn<T, CompareCode::Le>{}(a, b);
    case CompareCode::Gt: return k::CompareFn<T, CompareCode::Gt>{}(a, b);
    case CompareCode::Ge: return k::CompareFn<T, CompareCode::Ge>{}(a, b);
  }
  return false;
}

template <class T>
uint64_t bits(T v) {
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof v);
  return b;
}

constexpr CompareCode kAll[] = {CompareCode::Eq, CompareCode::Ne, CompareCode::Lt,
                                CompareCode::Le, CompareCode::Gt, CompareCode::Ge};

}  // namespace

TEST(CompareOps, OrderedValuesCompareAsTheOperators) {
  // {a, b, eq, ne, lt, le, gt, ge}
  const double cases[][8] = {{1, 2, 0, 1, 1, 1, 0, 0},
                             {2, 1, 0, 1, 0, 0, 1, 1},
                             {3, 3, 1, 0, 0, 1, 0, 1},
                             {-0.0, 0.0, 1, 0, 0, 1, 0, 1},
                             {-INFINITY, INFINITY, 0, 1, 1, 1, 0, 0}};
  for (const auto& c : cases) {
    for (int k = 0; k < 6; ++k) {
      EXPECT_EQ(cmp<double>(kAll[k], c[0], c[1]), c[2 + k] != 0) << c[0] << " op " << k << " " << c[1];
      EXPECT_EQ(cmp<float>(kAll[k], static_cast<float>(c[0]), static_cast<float>(c[1])), c[2 + k] != 0);
    }
  }
}

TEST(CompareOps, NanComparesUnequalToEverything) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (double other : {nan, 0.0, 1.0, -std::numeric_limits<double>::infinity()}) {
    for (int k = 0; k < 6; ++k) {
      const bool expected = kAll[k] == CompareCode::Ne;
      EXPECT_EQ(cmp<double>(kAll[k], nan, other), expected) << k;
      EXPECT_EQ(cmp<double>(kAll[k], other, nan), expected) << k;
      EXPECT_EQ(cmp<float>(kAll[k], static_cast<float>(nan), static_cast<float>(other)), expected) << k;
    }
  }
}

TEST(CompareOps, IntegersAndBoolsCompareExactly) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  // Distinct in int64, equal once rounded to double: the functor must compare in T.
  EXPECT_FALSE(cmp<int64_t>(CompareCode::Eq, big, big - 1));
  EXPECT_TRUE(cmp<int64_t>(CompareCode::Gt, big, big - 1));
  EXPECT_TRUE(cmp<int64_t>(CompareCode::Lt, std::numeric_limits<int64_t>::lowest(), 0));
  EXPECT_TRUE(cmp<int32_t>(CompareCode::Le, -5, -5));
  EXPECT_FALSE(cmp<int32_t>(CompareCode::Ge, -6, -5));
  EXPECT_TRUE(cmp<bool>(CompareCode::Lt, false, true));
  EXPECT_TRUE(cmp<bool>(CompareCode::Ne, true, false));
  EXPECT_FALSE(cmp<bool>(CompareCode::Gt, false, true));
  EXPECT_TRUE(cmp<bool>(CompareCode::Eq, true, true));
}

TEST(CompareOps, SelectionsCopyTheChosenBitsUnchanged) {
  // A NaN with a payload and -0.0: a select through arithmetic would change them.
  const uint64_t payload = 0x7ff4000000001234ull;
  double nan;
  std::memcpy(&nan, &payload, 8);
  const k::WhereFn<double> where{};
  EXPECT_EQ(bits(where(true, nan, 1.0)), payload);
  EXPECT_EQ(bits(where(false, 1.0, nan)), payload);
  EXPECT_EQ(bits(where(true, -0.0, 0.0)), bits(-0.0));
  EXPECT_EQ(bits(where(false, -0.0, 0.0)), bits(0.0));
  EXPECT_EQ(k::WhereFn<int64_t>{}(false, 1, std::numeric_limits<int64_t>::lowest()),
            std::numeric_limits<int64_t>::lowest());
  EXPECT_EQ(k::WhereFn<int32_t>{}(true, -7, 8), -7);
  EXPECT_EQ(k::WhereFn<bool>{}(true, false, true), false);
  EXPECT_EQ(k::WhereFn<bool>{}(false, false, true), true);
  EXPECT_EQ(bits(k::WhereFn<float>{}(true, -0.0f, 1.0f)), bits(-0.0f));

  const k::MaskedFillFn<double> fill{-0.0};
  EXPECT_EQ(bits(fill(nan, true)), bits(-0.0));
  EXPECT_EQ(bits(fill(nan, false)), payload);
  EXPECT_EQ((k::MaskedFillFn<int32_t>{-3}(9, true)), -3);
  EXPECT_EQ((k::MaskedFillFn<int32_t>{-3}(9, false)), 9);
  EXPECT_EQ((k::MaskedFillFn<bool>{true}(false, true)), true);
  EXPECT_EQ((k::MaskedFillFn<float>{INFINITY}(2.5f, true)), INFINITY);
}
