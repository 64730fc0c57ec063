// The fixed orders shared by the CPU and GPU row ops (strata_kernels/common/row_reduce.h,
// column_sum.h): CpuRow's sums equal a plain emulation of the documented lanes and halving
// tree, the norms' parameter gradients follow the documented row blocks, and every row op
// gives the same bits with 1, 2 or 3 threads.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "strata/strata.h"
#include "strata_kernels/common/column_sum.h"
#include "strata_kernels/common/row_reduce.h"

namespace strata {
namespace {

using strata_kernels::CpuRow;
using strata_kernels::kColumnBlockRows;
using strata_kernels::kRowLanes;

// The order as row_reduce.h states it, written the obvious way.
double emulated_row_sum(const std::vector<double>& v) {
  std::vector<double> lanes(kRowLanes, 0.0);
  for (size_t j = 0; j < v.size(); ++j) lanes[j % kRowLanes] += v[j];
  for (int s = kRowLanes / 2; s > 0; s /= 2)
    for (int l = 0; l < s; ++l) lanes[l] = lanes[l] + lanes[l + s];
  return lanes[0];
}

// Values whose sum depends on the order: magnitudes from 1e-8 to 1e8, both signs.
std::vector<double> order_sensitive(size_t n, uint64_t seed) {
  Generator gen(seed);
  const std::vector<double> u = randn({static_cast<int64_t>(n)}, {.dtype = DType::Float64}, &gen).to_vector<double>();
  std::vector<double> v(n);
  for (size_t j = 0; j < n; ++j) v[j] = u[j] * std::pow(10.0, static_cast<double>(static_cast<int>(j * 7 % 17) - 8));
  return v;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Same shape and the same bits in every element.
bool identical(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i)
    if (!same_bits(x[i], y[i])) return false;
  return true;
}

TEST(RowOrder, CpuRowSumIsTheDocumentedLaneTree) {
  for (size_t n : {0, 1, 5, 31, 32, 33, 64, 95, 1000, 50257}) {
    const std::vector<double> v = order_sensitive(n, n + 1);
    const double got = CpuRow::sum(static_cast<int64_t>(n), [&](int64_t j) { return v[static_cast<size_t>(j)]; });
    EXPECT_TRUE(same_bits(got, emulated_row_sum(v))) << "n = " << n << ": " << got << " vs " << emulated_row_sum(v);
  }
}

TEST(RowOrder, CpuRowSum2IsTwoSumsInTheSameOrder) {
  const std::vector<double> a = order_sensitive(777, 1), b = order_sensitive(777, 2);
  const strata_kernels::Sum2 got = CpuRow::sum2(777, [&](int64_t j) {
    return strata_kernels::Sum2{a[static_cast<size_t>(j)], b[static_cast<size_t>(j)]};
  });
  EXPECT_TRUE(same_bits(got.a, emulated_row_sum(a)));
  EXPECT_TRUE(same_bits(got.b, emulated_row_sum(b)));
}

TEST(RowOrder, TheOrderIsNotASequentialSum) {
  // Guards the test above against values whose sum happens not to depend on the order.
  const std::vector<double> v = order_sensitive(1000, 1001);
  double sequential = 0;
  for (double x : v) sequential += x;
  EXPECT_FALSE(same_bits(sequential, emulated_row_sum(v)));
}

TEST(RowOrder, RmsNormWeightGradientFollowsTheRowBlocks) {
  const int64_t rows = 3 * kColumnBlockRows + 17, d = 45;
  Generator gen(6);
  const Tensor x = randn({rows, d}, {}, &gen), g = randn({rows, d}, {}, &gen);
  Tensor w = randn({d}, {}, &gen).set_requires_grad(true);
  const Tensor y = rms_norm(x, w, 1e-6);
  y.backward(g);
  // rstd as the forward rounded it, then column_sum.h's two steps.
  const std::vector<float> xs = x.to_vector<float>(), gs = g.to_vector<float>();
  std::vector<float> rstd(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) {
    double s = 0;
    std::vector<double> sq(static_cast<size_t>(d));
    for (int64_t j = 0; j < d; ++j) sq[static_cast<size_t>(j)] = double(xs[size_t(i * d + j)]) * xs[size_t(i * d + j)];
    s = emulated_row_sum(sq);
    rstd[size_t(i)] = static_cast<float>(1.0 / std::sqrt(s / static_cast<double>(d) + 1e-6));
  }
  const std::vector<float> dw = w.grad().to_vector<float>();
  const int64_t blocks = (rows + kColumnBlockRows - 1) / kColumnBlockRows;
  for (int64_t j = 0; j < d; ++j) {
    double total = 0;
    for (int64_t b = 0; b < blocks; ++b) {
      float partial = 0;
      for (int64_t i = b * kColumnBlockRows; i < std::min(rows, (b + 1) * kColumnBlockRows); ++i)
        partial += gs[size_t(i * d + j)] * xs[size_t(i * d + j)] * rstd[size_t(i)];
      total += partial;
    }
    EXPECT_EQ(dw[size_t(j)], static_cast<float>(total)) << "column " << j;
  }
}

// Runs fn with 1, 2 and 3 OpenMP threads and expects the same bits each time.
void expect_thread_independent(const char* what, const std::function<std::vector<Tensor>()>& fn) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::vector<Tensor> one = fn();
  for (int threads : {2, 3}) {
    omp_set_num_threads(threads);
    const std::vector<Tensor> many = fn();
    ASSERT_EQ(many.size(), one.size());
    for (size_t k = 0; k < one.size(); ++k) {
      EXPECT_TRUE(identical(one[k], many[k])) << what << " output " << k << " differs at " << threads << " threads";
    }
  }
  omp_set_num_threads(saved);
}

TEST(RowOrder, RowOpsGiveTheSameBitsForAnyThreadCount) {
  // rows * n above the ops' parallel threshold, rows not a multiple of the row blocks.
  const int64_t rows = 301, n = 97;
  Generator gen(7);
  const Tensor x = add(randn({rows, n}, {}, &gen), 2.0), g = randn({rows, n}, {}, &gen);
  const Tensor w = randn({n}, {}, &gen), b = randn({n}, {}, &gen);
  const Tensor targets = randint(0, n, {rows}, {.dtype = DType::Int64}, &gen);
  auto with_grads = [&](const std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>& op) {
    return [&, op]() {
      Tensor xl = x.detach().set_requires_grad(true), wl = w.detach().set_requires_grad(true),
             bl = b.detach().set_requires_grad(true);
      const Tensor y = op(xl, wl, bl);
      if (y.numel() == 1) {
        y.backward();
      } else {
        y.backward(g);
      }
      std::vector<Tensor> out{y, xl.grad()};
      if (wl.grad().defined()) out.push_back(wl.grad());
      if (bl.grad().defined()) out.push_back(bl.grad());
      return out;
    };
  };
  expect_thread_independent("softmax", with_grads([](auto& xl, auto&, auto&) { return softmax(xl, -1); }));
  expect_thread_independent("log_softmax", with_grads([](auto& xl, auto&, auto&) { return log_softmax(xl, -1); }));
  expect_thread_independent("cross_entropy",
                            with_grads([&](auto& xl, auto&, auto&) { return cross_entropy(xl, targets); }));
  expect_thread_independent("layer_norm",
                            with_grads([](auto& xl, auto& wl, auto& bl) { return layer_norm(xl, wl, bl, 1e-5); }));
  expect_thread_independent("rms_norm", with_grads([](auto& xl, auto& wl, auto&) { return rms_norm(xl, wl, 1e-6); }));
}

}  // namespace
}  // namespace strata
