// The row ops on a GPU against their CPU twins (label gpu): softmax, log_softmax,
// cross_entropy, layer_norm and rms_norm, forward and backward. Both devices run
// strata_kernels/common/row_*.h in row_reduce.h's order, so results are equal bit for bit except
// where the platform's exp or log is called (float64 exp, the log of the sum), which stays
// within the few-ulp bounds below. Rows are 1 to 65537 long (not multiples of the warp),
// one case is above 2^24 elements, and the outputs' memory is poisoned with NaN first.
#include <gtest/gtest.h>

#include <vector>

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

// float64's exp is the platform's on each side (glibc, CUDA): a few ulps; float32 uses
// fast_exp on both and is exact, except the log of a row sum rounded to float (1 ulp).
int64_t exp_bound(DType dtype) { return dtype == DType::Float64 ? 8 : 0; }
int64_t log_bound(DType dtype) { return dtype == DType::Float64 ? 8 : 1; }

TEST_F(RowOpsGpu, SoftmaxAndLogSoftmaxEqualTheCpu) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Generator gen(1);
    for (const RowShape& s : kShapes) {
      const Tensor x = mul(randn({s.rows, s.n}, {.dtype = dtype}, &gen), 4.0);
      const Tensor g = randn({s.rows, s.n}, {.dtype = dtype}, &gen);
      for (bool log : {false, true}) {
        const Tensor want = log ? log_softmax(x, -1) : softmax(x, -1);
        const Tensor got = on_gpu(want, [&] { return log ? log_softmax(x.to(gpu), -1) : softmax(x.to(gpu), -1); });
        EXPECT_LE(max_ulps(got, want), log ? log_bound(dtype) : exp_bound(dtype))
            << (log ? "log_softmax " : "softmax ") << dtype << " [" << s.rows << ", " << s.n << "]";
        // Backward from the CPU's output on both sides: the gradient kernels alone.
        Tensor xc = x.detach().set_requires_grad(true), xg = x.to(gpu).set_requires_grad(true);
        (log ? log_softmax(xc, -1) : softmax(xc, -1)).backward(g);
        (log ? log_softmax(xg, -1) : softmax(xg, -1)).backward(g.to(gpu));
        EXPECT_LE(max_ulps(xg.grad().to(Device::cpu()), xc.grad()), log ? 2 * log_bound(dtype) : exp_bound(dtype))
            << "backward " << (log ? "log_softmax " : "softmax ") << dtype << " [" << s.rows << ", " << s.n << "]";
      }
    }
  }
}

TEST_F(RowOpsGpu, SoftmaxAlongAnotherDimension) {
  Generator gen(2);
  const Tensor x = randn({4, 37, 5}, {}, &gen);
  const Tensor got = on_gpu(x, [&] { return softmax(x.to(gpu), 1); });
  EXPECT_EQ(max_ulps(got, softmax(x, 1)), 0);
}

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
        Tensor lc = logits.detach().set_requires_grad(true), lg = logits.to(gpu).set_requires_grad(true);
        const Tensor want = cross_entropy(lc, targets, -100);
        poison(s.rows * s.n, dtype);
        const Tensor got = cross_entropy(lg, targets.to(gpu), -100);
        ASSERT_TRUE(got.device().is_cuda());
        EXPECT_LE(max_ulps(got.to(Device::cpu()), want), log_bound(dtype))
            << dtype << " [" << s.rows << ", " << s.n << "]";
        want.backward();
        got.backward();
        EXPECT_LE(max_ulps(lg.grad().to(Device::cpu()), lc.grad()), 2 * log_bound(dtype) + exp_bound(dtype))
            << "backward " << dtype << " [" << s.rows << ", " << s.n << "]";
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
