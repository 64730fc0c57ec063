// The per-element work of the GPU's index_select and index_add (and the embedding, their
// case outer == 1), strata_kernels/common/index_rows.h, run here in a plain loop after a
// stable sort as the GPU runs it after CUB's: equal bit for bit to the CPU ops along every
// dimension, with repeated indices whose summation order shows in the float32 bits, and bad
// indices flagged and skipped.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "backend/cpu/dim_layout.h"
#include "strata/strata.h"
#include "strata_kernels/common/index_rows.h"
#include "test_util.h"

using strata::testing::same_bits;

namespace {

using strata::DType;
using strata::Shape;
using strata::Tensor;
using strata_kernels::SelectRows;
using strata_kernels::SumRuns;

// The GPU's index_select, one functor call per output element.
template <class E, class I>
Tensor select_rows(const Tensor& x, int64_t dim, const std::vector<I>& index, int32_t* bad) {
  const strata::cpu::Layout l = strata::cpu::layout_of(x.shape(), dim);
  const auto m = static_cast<int64_t>(index.size());
  Shape shape = x.shape();
  shape[static_cast<size_t>(dim)] = m;
  Tensor out = strata::empty(shape, {.dtype = x.dtype()});
  const SelectRows<E, I> f{
      static_cast<E*>(out.raw_data()), static_cast<const E*>(x.raw_data()), index.data(), l.n, m, l.inner, bad};
  for (int64_t t = 0; t < out.numel(); ++t) f(t);
  return out;
}

// The GPU's index_add into a copy of x: the (index, position) pairs stably sorted by index,
// then one functor call per (outer, sorted position, column). n_bound: the row count the
// kernel is told (the embedding passes none, INT64_MAX).
template <class T, class I>
Tensor sum_runs(const Tensor& x, int64_t dim, const std::vector<I>& index, const Tensor& src, int32_t* bad,
                int64_t n_bound = -1) {
  const strata::cpu::Layout l = strata::cpu::layout_of(x.shape(), dim);
  const auto m = static_cast<int64_t>(index.size());
  std::vector<int64_t> positions(index.size());
  std::iota(positions.begin(), positions.end(), 0);
  std::stable_sort(positions.begin(), positions.end(),
                   [&](int64_t a, int64_t b) { return index[static_cast<size_t>(a)] < index[static_cast<size_t>(b)]; });
  std::vector<I> keys;
  for (int64_t p : positions) keys.push_back(index[static_cast<size_t>(p)]);
  Tensor out = x.clone();
  const SumRuns<T, I> f{static_cast<T*>(out.raw_data()),
                        static_cast<const T*>(src.raw_data()),
                        keys.data(),
                        positions.data(),
                        n_bound < 0 ? l.n : n_bound,
                        m,
                        l.inner,
                        bad};
  for (int64_t t = 0; t < l.outer * m * l.inner; ++t) f(t);
  return out;
}

Tensor longs(const std::vector<int64_t>& v) { return strata::from_vector(v, {static_cast<int64_t>(v.size())}); }

// m entries in [0, n): m / 3 rows (as far as n allows), each named about 3 times, apart.
std::vector<int64_t> repeated_index(int64_t n, int64_t m) {
  std::vector<int64_t> idx;
  for (int64_t j = 0; j < m; ++j) idx.push_back((j % std::max<int64_t>(m / 3, 1) * 7 + 3) % n);
  return idx;
}

// float32 sources of magnitudes 2^-20 to 2^20 and both signs: a sum's bits depend on its order.
Tensor spread(const Shape& shape, uint64_t seed) {
  strata::Generator gen(seed);
  Tensor base = strata::randn(shape, {}, &gen);
  return strata::mul(base, strata::exp(strata::mul(strata::randn(shape, {}, &gen), 7.0)));
}

TEST(IndexRowsFunctors, SelectEqualsTheCpuOpAlongEveryDimension) {
  const Shape shape{4, 5, 6};
  for (int64_t dim = 0; dim < 3; ++dim) {
    const std::vector<int64_t> idx = repeated_index(shape[static_cast<size_t>(dim)], 9);
    const std::vector<int32_t> idx32(idx.begin(), idx.end());
    for (DType dtype : {DType::Float32, DType::Float64, DType::BFloat16, DType::Int64, DType::Bool}) {
      const Tensor x = strata::randn(shape, {.dtype = DType::Float64}).to(dtype);
      const Tensor want = strata::index_select(x, dim, longs(idx));
      int32_t bad = 0;
      Tensor got;
      switch (strata::dtype_size(dtype)) {
        case 1: got = select_rows<uint8_t>(x, dim, idx32, &bad); break;
        case 2: got = select_rows<uint16_t>(x, dim, idx, &bad); break;
        case 4: got = select_rows<uint32_t>(x, dim, idx32, &bad); break;
        default: got = select_rows<uint64_t>(x, dim, idx, &bad); break;
      }
      EXPECT_TRUE(same_bits(got, want)) << "dim " << dim << " " << dtype;
      EXPECT_EQ(bad, 0);
    }
  }
}

TEST(IndexRowsFunctors, SumRunsEqualTheCpuOpBitForBit) {
  const Shape shape{3, 4, 5};
  for (int64_t dim = 0; dim < 3; ++dim) {
    const int64_t m = 11;
    const std::vector<int64_t> idx = repeated_index(shape[static_cast<size_t>(dim)], m);
    Shape src_shape = shape;
    src_shape[static_cast<size_t>(dim)] = m;
    const Tensor x = spread(shape, 1), src = spread(src_shape, 2);
    const Tensor want = strata::index_add(x, dim, longs(idx), src);
    int32_t bad = 0;
    EXPECT_TRUE(same_bits(sum_runs<float>(x, dim, idx, src, &bad), want)) << "dim " << dim;
    const std::vector<int32_t> idx32(idx.begin(), idx.end());
    EXPECT_TRUE(same_bits(sum_runs<float>(x, dim, idx32, src, &bad), want)) << "int32 index, dim " << dim;
    EXPECT_EQ(bad, 0);
    // The order shows: the sources of each destination added in decreasing j give other bits.
    std::vector<int64_t> reversed(idx.rbegin(), idx.rend()), back(static_cast<size_t>(m));
    std::iota(back.rbegin(), back.rend(), 0);
    const Tensor flipped = strata::index_add(x, dim, longs(reversed), strata::index_select(src, dim, longs(back)));
    EXPECT_FALSE(same_bits(flipped, want)) << "dim " << dim << ": the values do not test the order";
    for (DType dtype : {DType::Float64, DType::Int32, DType::Int64}) {
      const Tensor xd = strata::mul(strata::randn(shape, {.dtype = DType::Float64}), 1000.0).to(dtype);
      const Tensor sd = strata::mul(strata::randn(src_shape, {.dtype = DType::Float64}), 1000.0).to(dtype);
      const Tensor w = strata::index_add(xd, dim, longs(idx), sd);
      Tensor got;
      if (dtype == DType::Float64) got = sum_runs<double>(xd, dim, idx, sd, &bad);
      if (dtype == DType::Int32) got = sum_runs<int32_t>(xd, dim, idx, sd, &bad);
      if (dtype == DType::Int64) got = sum_runs<int64_t>(xd, dim, idx, sd, &bad);
      EXPECT_TRUE(same_bits(got, w)) << "dim " << dim << " " << dtype;
    }
  }
}

TEST(IndexRowsFunctors, EmbeddingCaseWithoutAnUpperBound) {
  // The embedding's backward: outer == 1 and no row count (INT64_MAX) gives the same sums.
  const std::vector<int64_t> idx{2, 0, 2, 2, 1, 0};
  const Tensor x = spread({3, 7}, 3), src = spread({6, 7}, 4);
  int32_t bad = 0;
  EXPECT_TRUE(same_bits(sum_runs<float>(x, 0, idx, src, &bad, INT64_MAX), strata::index_add(x, 0, longs(idx), src)));
  EXPECT_EQ(bad, 0);
}

TEST(IndexRowsFunctors, BadIndicesAreFlaggedAndSkipped) {
  const Tensor x = strata::randn({3, 4, 2});
  // Select: the bad rows are zero, the others as the CPU's select of the good ones.
  int32_t bad = 0;
  const Tensor got = select_rows<uint32_t>(x, 1, std::vector<int64_t>{1, 4, 3, -1}, &bad);
  EXPECT_EQ(bad, 1);
  const Tensor good = strata::index_select(x, 1, longs({1, 3}));
  EXPECT_TRUE(same_bits(got.narrow(1, 0, 1), good.narrow(1, 0, 1)));
  EXPECT_TRUE(same_bits(got.narrow(1, 2, 1), good.narrow(1, 1, 1)));
  EXPECT_EQ(strata::sum(strata::abs(got.narrow(1, 1, 1))).item(), 0.0);
  EXPECT_EQ(strata::sum(strata::abs(got.narrow(1, 3, 1))).item(), 0.0);
  // A null flag: still zero rows, no write through it.
  const Tensor quiet = select_rows<uint32_t>(x, 1, std::vector<int64_t>{4}, nullptr);
  EXPECT_EQ(strata::sum(strata::abs(quiet)).item(), 0.0);
  // Add: the bad sources add nothing; the rest as the CPU's add of the good ones.
  bad = 0;
  const Tensor src = strata::randn({3, 4, 2});
  const Tensor added = sum_runs<float>(x, 1, std::vector<int64_t>{-2, 2, 9, 2}, src, &bad);
  EXPECT_EQ(bad, 1);
  const Tensor kept = strata::index_add(x, 1, longs({2, 2}), strata::index_select(src, 1, longs({1, 3})));
  EXPECT_TRUE(same_bits(added, kept));
}

}  // namespace
