// The row ops on a GPU against their CPU twins (label gpu): softmax, log_softmax,
// cross_entropy, layer_norm and rms_norm, forward and backward. Both devices run
// strata_kernels/common/row_*.h in row_reduce.h's order, so results are equal bit for bit except
// where the platform's exp or log is called (float64 exp, the log of the sum), and softmax over
// a middle dimension (the CPU's column kernel sums in another order): there each test derives
// its bound (gpu/derived_bounds.h) and writes the derivation beside it. Rows are 1 to 65537 long (not multiples of the
// warp), one case is above 2^24 elements, and the outputs' memory is poisoned with NaN first.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/softmax.h"
#include "backend/cuda/cuda_ops.h"
#include "gpu/derived_bounds.h"
#include "gpu/gpu_test.h"
#include "strata/strata.h"

namespace strata {
namespace {

using RowOpsGpu = testing::GpuTest;
using testing::max_ulps;
using testing::poison;

struct RowShape {
  int64_t rows, n;
};
const std::vector<RowShape> kShapes{{1, 1}, {3, 31}, {7, 33}, {64, 768}, {130, 1000}, {5, 50257}};

// Poisons, runs fn on the GPU copy of the inputs and returns the result on the CPU.
template <class Fn>
Tensor on_gpu(const Tensor& like, Fn&& fn) {
  poison(like.numel(), like.dtype());
  return fn().to(Device::cpu());
}

// Per-row sums as row_reduce.h adds them: each of kRowLanes lanes adds its share (the first
// addition to 0 is exact), then 5 halving steps; a path through at most this many roundings.
double row_sum_roundings(int64_t n) {
  const int64_t per_lane = (n + 31) / 32;  // ceil(n / kRowLanes)
  return static_cast<double>(per_lane + 5);
}

// Per-element bounds on |gpu - cpu| for the softmax forward (x a CPU [rows, n] tensor, y the
// CPU's result). u: the dtype's unit roundoff; l = library_error(2^-53), the relative error
// of one side's double exp or log (derived_bounds.h); d = row_sum_roundings(n). Both sides
// subtract the same row maximum m (exact) and add in the same order.
//  softmax float32: fast_exp and the double sum are the same bits on both sides: 0.
//  softmax float64: each side's e_j = exp(x_j - m) errs by l; its sum of positive terms by l
//    + gamma_d; 1 / s and e_j * inv round once each: |y - exact| <= (2l + 2u + gamma_d) |y|
//    per side, so |y_gpu - y_cpu| <= 2 (2l + 2u + gamma_d) |y|.
//  log_softmax float64: s errs by l + gamma_d relatively, so log(s) by that absolutely,
//    plus l |log s| from the library log; y = (x - m) - ls rounds once (x - m is the same
//    bits): |dy| <= 2 (l + gamma_d) + 2 l |ls| + 2u |y|.
//  log_softmax float32: the double sum is the same bits; the two double logs are within 2l
//    |ls| and each rounds to float (u |ls|); y rounds once: |dy| <= (2l + 2u) |ls| + 2u |y|.
std::vector<double> softmax_forward_bound(const Tensor& x, const Tensor& y, bool log) {
  const int64_t rows = x.size(0), n = x.size(1);
  const double u = testing::unit_roundoff(x.dtype()), l = testing::library_error(0x1p-53);
  const double g = testing::gamma_k(row_sum_roundings(n), 0x1p-53);
  const bool f64 = x.dtype() == DType::Float64;
  const std::vector<double> xs = x.to_vector<double>(), ys = y.to_vector<double>();
  std::vector<double> bound(xs.size());
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = xs.data() + r * n;
    const double m = *std::max_element(xr, xr + n);
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += std::exp(xr[j] - m);
    const double ls = std::log(sum);
    for (int64_t j = 0; j < n; ++j) {
      const double yj = std::abs(ys[r * n + j]);
      double b = 0;
      if (!log) b = f64 ? 2 * (2 * l + 2 * u + g) * yj : 0;
      if (log) b = f64 ? 2 * (l + g) + 2 * l * ls + 2 * u * yj : (2 * l + 2 * u) * ls + 2 * u * yj;
      bound[r * n + j] = b;
    }
  }
  return bound;
}

// The log_softmax backward's bound in float64 (g, y: CPU tensors; both sides read the same y):
// dx = g - exp(y) * sg with sg = sum(g), the same bits on both sides (same order, same
// inputs). exp(y) errs by l per side; the product and the difference round once each:
//   |dx_gpu - dx_cpu| <= (2l + 2u) p |sg| + u (|dx_gpu| + |dx_cpu|)
//                     <= (2l + 4u) p |sg| + 2u |g|,   p = exp(y).
std::vector<double> log_softmax_backward_bound(const Tensor& g, const Tensor& y) {
  const int64_t rows = y.size(0), n = y.size(1);
  const double u = 0x1p-53, l = testing::library_error(u);
  const std::vector<double> gs = g.to_vector<double>(), ys = y.to_vector<double>();
  std::vector<double> bound(gs.size());
  for (int64_t r = 0; r < rows; ++r) {
    double sg = 0;
    for (int64_t j = 0; j < n; ++j) sg += gs[r * n + j];
    for (int64_t j = 0; j < n; ++j) {
      const size_t i = static_cast<size_t>(r * n + j);
      bound[i] = (2 * l + 4 * u) * std::exp(ys[i]) * std::abs(sg) + 2 * u * std::abs(gs[i]);
    }
  }
  return bound;
}

// Proves: softmax and log_softmax forward equal the CPU bit for bit in float32 (log_softmax
// within the rounding of its float log) and within the derived bounds in float64; their
// backward kernels, given the same y, equal the CPU bit for bit except log_softmax's float64
// exp (bound above).
TEST_F(RowOpsGpu, SoftmaxAndLogSoftmaxEqualTheCpu) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Generator gen(1);
    for (const RowShape& s : kShapes) {
      const Tensor x = mul(randn({s.rows, s.n}, {.dtype = dtype}, &gen), 4.0);
      const Tensor g = randn({s.rows, s.n}, {.dtype = dtype}, &gen);
      for (bool log : {false, true}) {
        const std::string what = std::string(log ? "log_softmax " : "softmax ") + std::string(dtype_name(dtype)) +
                                 " [" + std::to_string(s.rows) + ", " + std::to_string(s.n) + "]";
        const Tensor want = log ? log_softmax(x, -1) : softmax(x, -1);
        const Tensor got = on_gpu(want, [&] { return log ? log_softmax(x.to(gpu), -1) : softmax(x.to(gpu), -1); });
        EXPECT_LE(testing::worst_over_bound(got, want, softmax_forward_bound(x, want, log)), 1.0) << what;
        // The gradient kernels alone, from the CPU's output on both sides.
        const Tensor dx_cpu = cpu::softmax_backward(g, want, 1, log);
        poison(want.numel(), dtype);
        const Tensor dx_gpu = cuda_ops::softmax_backward(g.to(gpu), want.to(gpu), 1, log).to(Device::cpu());
        if (log && dtype == DType::Float64) {
          EXPECT_LE(testing::worst_over_bound(dx_gpu, dx_cpu, log_softmax_backward_bound(g, want)), 1.0)
              << "backward " << what;
        } else {
          EXPECT_EQ(max_ulps(dx_gpu, dx_cpu), 0) << "backward " << what;
        }
      }
    }
  }
}

// Proves: softmax over a middle dimension (the GPU moves it last and runs the row kernel) is
// within the bound below of the CPU's column kernel (backend/cpu/softmax.cpp), which sums in
// float, in sequence, and divides in float. Both compute the same e_j = fast_exp(x_j - m)
// (same bits). CPU: the float sum of n positive terms errs by gamma_{n-1}, 1 / s and e_j * inv
// round once each: gamma_{n+1}(2^-24) per element. GPU: the double lane sum errs by gamma_d
// (d = row_sum_roundings(n)), 1.0 / s once in double, then the cast to float and e_j * inv:
// gamma_{d+1}(2^-53) + gamma_2(2^-24). So |y_gpu - y_cpu| <= c |y| with c the sum of the
// two; |y| <= |y_cpu| / (1 - gamma_{n+1}).
TEST_F(RowOpsGpu, SoftmaxAlongAnotherDimension) {
  Generator gen(2);
  const int64_t n = 37;
  const Tensor x = randn({4, n, 5}, {}, &gen);
  const Tensor got = on_gpu(x, [&] { return softmax(x.to(gpu), 1); });
  const Tensor want = softmax(x, 1);
  const double cpu_error = testing::gamma_k(static_cast<double>(n + 1), 0x1p-24);
  const double c = cpu_error + testing::gamma_k(row_sum_roundings(n) + 1, 0x1p-53) + testing::gamma_k(2, 0x1p-24);
  std::vector<double> bound = want.to_vector<double>();
  for (double& b : bound) b = c * std::abs(b) / (1 - cpu_error);
  EXPECT_LE(testing::worst_over_bound(got, want, bound), 1.0);
}

// The bound on |loss_gpu - loss_cpu| of cross_entropy (logits [rows, n], CPU tensors). Per
// counted row both sides compute L_r = log(s_r) - (x_t - m) in double (the subtraction's
// operands are the same bits), then sum the rows in row_reduce.h's order, divide by the count
// in double and round to the logits' dtype. Each side's L_r errs by
//   float64: (l + gamma_d) + l ls_r + u L_r  (s_r: exps and sum; log(s_r); the subtraction)
//   float32: l ls_r + u L_r                  (s_r is the same bits: fast_exp, same order)
// with u = 2^-53 here, ls_r = log(s_r), d = row_sum_roundings(n). The row sum of L_r >= 0
// adds gamma_D (D = row_sum_roundings(rows)) relative to the sum, the division u and the cast
// to the dtype its unit roundoff u_T, so |dloss| <= 2 (sum_r e_r + gamma_D sum_r L_r) / count
// + 2 (u + u_T) loss.
double cross_entropy_forward_bound(const Tensor& logits, const Tensor& targets) {
  const int64_t rows = logits.size(0), n = logits.size(1);
  const double u = 0x1p-53, l = testing::library_error(u), ut = testing::unit_roundoff(logits.dtype());
  const double g = testing::gamma_k(row_sum_roundings(n), u), gr = testing::gamma_k(row_sum_roundings(rows), u);
  const bool f64 = logits.dtype() == DType::Float64;
  const std::vector<double> xs = logits.to_vector<double>();
  const std::vector<int64_t> ts = targets.to_vector<int64_t>();
  double errors = 0, total = 0;
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (ts[r] == -100) continue;
    const double* xr = xs.data() + r * n;
    const double m = *std::max_element(xr, xr + n);
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += std::exp(xr[j] - m);
    const double ls = std::log(sum), loss = ls - (xr[ts[r]] - m);
    errors += (f64 ? l + g : 0.0) + l * ls + u * loss;
    total += loss;
    ++count;
  }
  if (count == 0) return 0;
  const double mean = total / static_cast<double>(count);
  return 2 * (errors + gr * total) / static_cast<double>(count) + 2 * (u + ut) * mean;
}

// The cross_entropy backward's bound in float64 (both sides read the CPU forward's stats m and
// ls): p_j = exp((x_j - m) - ls) * coef, the argument and coef the same bits on both sides;
// exp errs by l per side and the product rounds once: |dp_j| <= (2l + 2u) e_j |coef|, e_j =
// exp((x_j - m) - ls); the target's p - coef rounds once more per side: + 2u (e_t + 1) |coef|.
std::vector<double> cross_entropy_backward_bound(const Tensor& logits, const Tensor& targets, const Tensor& stats,
                                                 double coef) {
  const int64_t rows = logits.size(0), n = logits.size(1);
  const double u = 0x1p-53, l = testing::library_error(u);
  const std::vector<double> xs = logits.to_vector<double>(), st = stats.to_vector<double>();
  const std::vector<int64_t> ts = targets.to_vector<int64_t>();
  std::vector<double> bound(xs.size(), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    if (ts[r] == -100) continue;  // ignored: 0 on both sides
    for (int64_t j = 0; j < n; ++j) {
      const size_t i = static_cast<size_t>(r * n + j);
      const double e = std::exp((xs[i] - st[2 * r]) - st[2 * r + 1]);
      bound[i] = (2 * l + 2 * u) * e * std::abs(coef) + (j == ts[r] ? 2 * u * (e + 1) * std::abs(coef) : 0.0);
    }
  }
  return bound;
}

// Proves: cross_entropy's loss is within the derived bound of the CPU's; its backward kernel,
// given the CPU forward's stats, equals the CPU bit for bit in float32 and within the derived
// bound above in float64.
TEST_F(RowOpsGpu, CrossEntropyEqualsTheCpu) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (DType index : {DType::Int32, DType::Int64}) {
      Generator gen(3);
      for (const RowShape& s : kShapes) {
        const Tensor logits = mul(randn({s.rows, s.n}, {.dtype = dtype}, &gen), 3.0);
        Tensor targets = randint(0, s.n, {s.rows}, {.dtype = index}, &gen);
        if (s.rows > 2) {
          std::vector<int64_t> t = targets.to_vector<int64_t>();
          t[1] = -100;  // one ignored row
          targets = from_vector(t, {s.rows}).to(index);
        }
        const std::string what =
            std::string(dtype_name(dtype)) + " [" + std::to_string(s.rows) + ", " + std::to_string(s.n) + "]";
        const Tensor want = cross_entropy(logits, targets, -100);
        poison(s.rows * s.n, dtype);
        const Tensor got = cross_entropy(logits.to(gpu), targets.to(gpu), -100);
        ASSERT_TRUE(got.device().is_cuda());
        EXPECT_LE(std::abs(got.item() - want.item()),
                  cross_entropy_forward_bound(logits, targets) * testing::kSecondOrder)
            << what;
        const backend::CrossEntropyResult fwd = cpu::cross_entropy_forward(logits, targets, -100, s.n);
        const Tensor one = ones({}, {.dtype = dtype});
        const Tensor dx_cpu = cpu::cross_entropy_backward(one, logits, targets, fwd.stats, -100, fwd.count, s.n);
        poison(s.rows * s.n, dtype);
        const Tensor dx_gpu = cuda_ops::cross_entropy_backward(one.to(gpu), logits.to(gpu), targets.to(gpu),
                                                               fwd.stats.to(gpu), -100, fwd.count, s.n)
                                  .to(Device::cpu());
        if (dtype == DType::Float64) {
          const double coef = fwd.count > 0 ? 1.0 / static_cast<double>(fwd.count) : 0.0;
          EXPECT_LE(
              testing::worst_over_bound(dx_gpu, dx_cpu, cross_entropy_backward_bound(logits, targets, fwd.stats, coef)),
              1.0)
              << "backward " << what;
        } else {
          EXPECT_EQ(max_ulps(dx_gpu, dx_cpu), 0) << "backward " << what;
        }
      }
    }
  }
}

TEST_F(RowOpsGpu, CrossEntropyNamesAnOutOfRangeTarget) {
  const Tensor logits = zeros({4, 10}, {.device = gpu});
  const Tensor targets = from_vector<int64_t>({1, 2, 12, 3}, {4}).to(gpu);
  try {
    (void)cross_entropy(logits, targets);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("target 12 at position 2"), std::string::npos) << e.what();
  }
}

// A class limit (a padded vocabulary): the GPU's loss over the first `classes` columns equals
// its loss over those columns sliced, bit for bit (the same kernel reads the same values in
// the same order); the padding columns, set huge, get gradient exactly 0.
TEST_F(RowOpsGpu, CrossEntropyClassLimitEqualsSlicingAndZeroesPadding) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    const int64_t rows = 37, classes = 50257, cols = 50304;
    Generator gen(31);
    Tensor x = randn({rows, cols}, {.dtype = dtype}, &gen);
    x.narrow(1, classes, cols - classes).fill_(1e4);
    const Tensor t = randint(0, classes, {rows}, {.dtype = DType::Int64}, &gen).to(gpu);
    Tensor padded = x.to(gpu).set_requires_grad(true);
    Tensor sliced = x.narrow(1, 0, classes).contiguous().to(gpu).set_requires_grad(true);
    Tensor lp = cross_entropy(padded, t, -100, classes), ls = cross_entropy(sliced, t);
    EXPECT_EQ(lp.item(), ls.item()) << dtype_name(dtype);
    lp.backward();
    ls.backward();
    const Tensor gp = padded.grad().to(Device::cpu()), gs = sliced.grad().to(Device::cpu());
    EXPECT_EQ(max_abs_diff(gp.narrow(1, 0, classes), gs), 0.0) << dtype_name(dtype);
    EXPECT_EQ(max_abs_diff(gp.narrow(1, classes, cols - classes), zeros({rows, cols - classes}, {.dtype = dtype})), 0.0)
        << dtype_name(dtype);
  }
}

TEST_F(RowOpsGpu, LayerNormAndRmsNormEqualTheCpuBitForBit) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Generator gen(4);
    for (const RowShape& s : kShapes) {
      const Tensor x = add(randn({s.rows, s.n}, {.dtype = dtype}, &gen), 3.0);  // a mean far from 0
      const Tensor w = randn({s.n}, {.dtype = dtype}, &gen), b = randn({s.n}, {.dtype = dtype}, &gen);
      const Tensor g = randn({s.rows, s.n}, {.dtype = dtype}, &gen);
      auto leaf = [](const Tensor& t) { return t.detach().set_requires_grad(true); };
      Tensor xc = leaf(x), wc = leaf(w), bc = leaf(b);
      Tensor xg = leaf(x.to(gpu)), wg = leaf(w.to(gpu)), bg = leaf(b.to(gpu));
      const Tensor want = layer_norm(xc, wc, bc, 1e-5);
      const Tensor got = on_gpu(want, [&] { return layer_norm(xg, wg, bg, 1e-5); });
      EXPECT_EQ(max_ulps(got, want), 0) << "layer_norm " << dtype << " [" << s.rows << ", " << s.n << "]";
      poison(x.numel(), dtype);
      want.backward(g);
      layer_norm(xg, wg, bg, 1e-5).backward(g.to(gpu));
      EXPECT_EQ(max_ulps(xg.grad().to(Device::cpu()), xc.grad()), 0) << "layer_norm dx " << dtype;
      EXPECT_EQ(max_ulps(wg.grad().to(Device::cpu()), wc.grad()), 0) << "layer_norm dweight " << dtype;
      EXPECT_EQ(max_ulps(bg.grad().to(Device::cpu()), bc.grad()), 0) << "layer_norm dbias " << dtype;

      Tensor xr = leaf(x), wr = leaf(w), xrg = leaf(x.to(gpu)), wrg = leaf(w.to(gpu));
      const Tensor want_rms = rms_norm(xr, wr, 1e-6);
      const Tensor got_rms = on_gpu(want_rms, [&] { return rms_norm(xrg, wrg, 1e-6); });
      EXPECT_EQ(max_ulps(got_rms, want_rms), 0) << "rms_norm " << dtype << " [" << s.rows << ", " << s.n << "]";
      want_rms.backward(g);
      rms_norm(xrg, wrg, 1e-6).backward(g.to(gpu));
      EXPECT_EQ(max_ulps(xrg.grad().to(Device::cpu()), xr.grad()), 0) << "rms_norm dx " << dtype;
      EXPECT_EQ(max_ulps(wrg.grad().to(Device::cpu()), wr.grad()), 0) << "rms_norm dweight " << dtype;
    }
  }
}

// Above 2^24 elements: 64-bit row offsets, and a grid that loops over rows.
TEST_F(RowOpsGpu, AboveTwoToThe24Elements) {
  Generator gen(5);
  const Tensor x = randn({260, 65537}, {}, &gen);
  const Tensor got = on_gpu(x, [&] { return softmax(x.to(gpu), -1); });
  EXPECT_EQ(max_ulps(got, softmax(x, -1)), 0);
  const Tensor w = randn({65537}, {}, &gen);
  const Tensor got_rms = on_gpu(x, [&] { return rms_norm(x.to(gpu), w.to(gpu), 1e-6); });
  EXPECT_EQ(max_ulps(got_rms, rms_norm(x, w, 1e-6)), 0);
}

}  // namespace
}  // namespace strata
