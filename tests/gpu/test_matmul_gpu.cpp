// matmul and linear on a GPU (cuBLASLt, src/backend/cuda/matmul.cpp) against the CPU (label
// gpu). Both run the same gemm::Plan, so every path of the plan is driven through both:
// one GEMM, merged rows, a uniform batch, a batch with offsets only, transposed and padded
// views, a copied layout, a shared operand, the summed batch (folded and accumulated), the
// bias (epilogue or fallback), empty contractions, shapes off every tile size (37x53x29) and
// a large product. The output's memory is poisoned with NaN before each run.
//
// Bounds, as the largest error over the largest reference magnitude:
//   float64: 1e-12 (float64 compute, only the summation order differs from the CPU)
//   float32: 1e-5 (float32 compute; TF32 would miss it on the large product, so this also
//            proves TF32 is off by default)
//   TF32 (cuda::set_allow_tf32(true)): 1e-2 against a float64 reference (10-bit mantissas)
//   bfloat16 / float16 (float32 accumulation, one rounding to the output): 2e-2 / 4e-3
//            against a float64 product of the same 16-bit inputs
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cuda/cuda_ops.h"
#include "gpu/gpu_test.h"
#include "strata/strata.h"
#include "test_util.h"

namespace strata {
namespace {

using MatmulGpu = testing::GpuTest;
using testing::poison;
using View = std::function<Tensor(const Tensor&)>;

Tensor same(const Tensor& t) { return t; }
Tensor transposed(const Tensor& t) { return t.transpose(-1, -2); }

Tensor rnd(const Shape& s, DType dtype, uint64_t seed) {
  Generator gen(seed);
  return randn(s, {.dtype = DType::Float64}, &gen).to(dtype);
}

// max |got - want| <= rel * max |want| (and no NaN), got on the GPU, want on the CPU.
void expect_close(const Tensor& got, const Tensor& want, double rel, const std::string& what) {
  ASSERT_TRUE(got.device().is_cuda()) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const std::vector<double> g = got.to(Device::cpu()).to(DType::Float64).to_vector<double>();
  const std::vector<double> w = want.to(DType::Float64).to_vector<double>();
  double scale = 0, err = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    ASSERT_FALSE(std::isnan(g[i])) << what << ": element " << i << " is NaN (not written)";
    scale = std::max(scale, std::abs(w[i]));
    err = std::max(err, std::abs(g[i] - w[i]));
  }
  EXPECT_LE(err, rel * std::max(scale, 1e-30)) << what << ": largest error " << err << ", largest value " << scale;
}

// A fresh leaf that requires grad, with t's values.
Tensor leaf(const Tensor& t) {
  Tensor l = t.detach();
  l.set_requires_grad(true);
  return l;
}

double exact_bound(DType dtype) { return dtype == DType::Float64 ? 1e-12 : 1e-5; }

struct Case {
  std::string name;
  Shape a_base, b_base;  // the stored tensors
  View a_view, b_view;   // the operands read from them (the same view on both devices)
};

std::vector<Case> plan_paths() {
  return {
      {"2-D 37x29 @ 29x53", {37, 29}, {29, 53}, same, same},
      {"uniform batch", {3, 37, 29}, {3, 29, 53}, same, same},
      {"batch with offsets", {3, 4, 37, 29}, {3, 3, 29, 53}, [](const Tensor& t) { return t.narrow(1, 0, 3); }, same},
      {"transposed views", {29, 37}, {53, 29}, transposed, transposed},
      {"transposed batches", {3, 29, 37}, {3, 53, 29}, transposed, transposed},
      {"shared b, merged rows", {2, 37, 29}, {29, 53}, same, same},
      {"shared b, transposed stack", {2, 29, 37}, {29, 53}, transposed, same},
      {"shared a", {37, 29}, {4, 29, 53}, same, same},
      {"shared a transposed", {29, 37}, {4, 53, 29}, transposed, transposed},
      {"padded rows", {37, 40}, {29, 53}, [](const Tensor& t) { return t.narrow(1, 3, 29); }, same},
      {"copied layout", {37, 29, 2}, {29, 53}, [](const Tensor& t) { return t.select(2, 0); }, same},
      {"one row", {1, 29}, {29, 53}, same, same},
      {"one column", {37, 29}, {29, 1}, same, same},
      {"empty contraction", {3, 0}, {0, 4}, same, same},
  };
}

TEST_F(MatmulGpu, EveryPlanPathMatchesTheCpu) {
  for (DType dtype : {DType::Float64, DType::Float32}) {
    uint64_t seed = 1;
    for (const Case& c : plan_paths()) {
      const Tensor a_cpu = rnd(c.a_base, dtype, seed++), b_cpu = rnd(c.b_base, dtype, seed++);
      const Tensor want = matmul(c.a_view(a_cpu), c.b_view(b_cpu));
      poison(want.numel(), dtype);
      const Tensor got = matmul(c.a_view(a_cpu.to(gpu)), c.b_view(b_cpu.to(gpu)));
      EXPECT_EQ(got.dtype(), dtype);
      expect_close(got, want, exact_bound(dtype), c.name + " " + std::string(dtype_name(dtype)));
    }
  }
}

TEST_F(MatmulGpu, LargeProduct) {
  for (DType dtype : {DType::Float64, DType::Float32}) {
    const Tensor a = rnd({512, 1024}, dtype, 100), b = rnd({1024, 768}, dtype, 101);
    const Tensor want = matmul(a, b);
    poison(want.numel(), dtype);
    expect_close(matmul(a.to(gpu), b.to(gpu)), want, exact_bound(dtype),
                 std::string("large ") + std::string(dtype_name(dtype)));
  }
}

// The summed batch (gradient of a shared operand) directly: folded into one contraction, and
// accumulated product by product where (batch, K) do not merge.
TEST_F(MatmulGpu, SummedBatchMatchesTheCpu) {
  for (DType dtype : {DType::Float64, DType::Float32}) {
    const Tensor g = rnd({4, 37, 53}, dtype, 200), x = rnd({4, 37, 29}, dtype, 201);
    const Tensor folded_a = g.transpose(-1, -2);
    poison(53 * 29, dtype);
    expect_close(cuda_ops::matmul_sum(g.to(gpu).transpose(-1, -2), x.to(gpu), "matmul"), cpu::matmul_sum(folded_a, x),
                 exact_bound(dtype), "folded sum");
    const Tensor a = rnd({3, 37, 29}, dtype, 202), b = rnd({3, 29, 53}, dtype, 203);
    poison(37 * 53, dtype);
    expect_close(cuda_ops::matmul_sum(a.to(gpu), b.to(gpu), "matmul"), cpu::matmul_sum(a, b), exact_bound(dtype),
                 "accumulated sum");
  }
}

// Bias on every row: through the epilogue where cuBLASLt has one, else the rank-1 fallback;
// on a uniform batch, a batch with offsets and an empty contraction.
TEST_F(MatmulGpu, BiasMatchesTheCpu) {
  for (DType dtype : {DType::Float64, DType::Float32}) {
    const Tensor bias = rnd({53}, dtype, 300);
    const Tensor big = rnd({3, 4, 37, 29}, dtype, 301), b = rnd({3, 3, 29, 53}, dtype, 302);
    const Tensor a = big.narrow(1, 0, 3);
    const Shape batch{3, 3};
    poison(9 * 37 * 53, dtype);
    expect_close(cuda_ops::matmul(big.to(gpu).narrow(1, 0, 3), b.to(gpu), batch, bias.to(gpu), "matmul"),
                 cpu::matmul(a, b, batch, bias), exact_bound(dtype), "bias, batch with offsets");
    const Tensor u = rnd({3, 37, 29}, dtype, 303), v = rnd({3, 29, 53}, dtype, 304);
    poison(3 * 37 * 53, dtype);
    expect_close(cuda_ops::matmul(u.to(gpu), v.to(gpu), Shape{3}, bias.to(gpu), "matmul"),
                 cpu::matmul(u, v, Shape{3}, bias), exact_bound(dtype), "bias, uniform batch");
    const Tensor e = rnd({5, 0}, dtype, 305), f = rnd({0, 53}, dtype, 306);
    poison(5 * 53, dtype);
    expect_close(cuda_ops::matmul(e.to(gpu), f.to(gpu), Shape{}, bias.to(gpu), "matmul"),
                 cpu::matmul(e, f, Shape{}, bias), exact_bound(dtype), "bias, empty contraction");
  }
}

// linear forward and backward (input, weight, bias gradients) on CUDA against the CPU.
TEST_F(MatmulGpu, LinearForwardBackwardMatchesTheCpu) {
  for (DType dtype : {DType::Float64, DType::Float32}) {
    const Tensor x = rnd({4, 7, 37}, dtype, 400), w = rnd({53, 37}, dtype, 401), bias = rnd({53}, dtype, 402);
    const Tensor seed = rnd({4, 7, 53}, dtype, 403);
    Tensor xc = leaf(x), wc = leaf(w), bc = leaf(bias);
    Tensor xg = leaf(x.to(gpu)), wg = leaf(w.to(gpu)), bg = leaf(bias.to(gpu));
    const Tensor yc = linear(xc, wc, bc), yg = linear(xg, wg, bg);
    yc.backward(seed);
    yg.backward(seed.to(gpu));
    const double tol = exact_bound(dtype);
    const std::string d(dtype_name(dtype));
    expect_close(yg, yc, tol, "linear output " + d);
    expect_close(xg.grad(), xc.grad(), tol, "linear input grad " + d);
    expect_close(wg.grad(), wc.grad(), tol, "linear weight grad " + d);
    expect_close(bg.grad(), bc.grad(), tol, "linear bias grad " + d);
  }
}

// matmul's backward on CUDA: batched operands, and a shared operand whose gradient is the
// summed batch.
TEST_F(MatmulGpu, MatmulBackwardMatchesTheCpu) {
  for (DType dtype : {DType::Float64, DType::Float32}) {
    const Tensor a = rnd({37, 29}, dtype, 500), b = rnd({4, 29, 53}, dtype, 501), seed = rnd({4, 37, 53}, dtype, 502);
    Tensor ac = leaf(a), bc = leaf(b), ag = leaf(a.to(gpu)), bg = leaf(b.to(gpu));
    matmul(ac, bc).backward(seed);
    matmul(ag, bg).backward(seed.to(gpu));
    expect_close(ag.grad(), ac.grad(), exact_bound(dtype), "shared a grad");
    expect_close(bg.grad(), bc.grad(), exact_bound(dtype), "batched b grad");
  }
}

// 16-bit operands on CUDA: float32 accumulation, output in the input dtype, against a
// float64 product of the same (rounded) inputs.
TEST_F(MatmulGpu, SixteenBitInputsAccumulateInFloat32) {
  for (DType dtype : {DType::BFloat16, DType::Float16}) {
    const double bound = dtype == DType::BFloat16 ? 2e-2 : 4e-3;
    uint64_t seed = 600;
    for (const Case& c : plan_paths()) {
      const Tensor a16 = rnd(c.a_base, dtype, seed++), b16 = rnd(c.b_base, dtype, seed++);
      const Tensor want = matmul(c.a_view(a16.to(DType::Float64)), c.b_view(b16.to(DType::Float64)));
      poison(want.numel(), dtype);
      const Tensor got = matmul(c.a_view(a16.to(gpu)), c.b_view(b16.to(gpu)));
      EXPECT_EQ(got.dtype(), dtype) << c.name;
      expect_close(got, want, bound, c.name + " " + std::string(dtype_name(dtype)));
    }
    // linear with 16-bit input, weight and bias, forward and backward.
    const Tensor x = rnd({4, 7, 37}, dtype, 700), w = rnd({53, 37}, dtype, 701), bias = rnd({53}, dtype, 702);
    const Tensor seed_g = rnd({4, 7, 53}, dtype, 703);
    Tensor xr = leaf(x.to(DType::Float64)), wr = leaf(w.to(DType::Float64)), br = leaf(bias.to(DType::Float64));
    Tensor xg = leaf(x.to(gpu)), wg = leaf(w.to(gpu)), bg = leaf(bias.to(gpu));
    const Tensor yr = linear(xr, wr, br), yg = linear(xg, wg, bg);
    yr.backward(seed_g.to(DType::Float64));
    yg.backward(seed_g.to(gpu));
    EXPECT_EQ(yg.dtype(), dtype);
    EXPECT_EQ(wg.grad().dtype(), dtype);
    expect_close(yg, yr, bound, "16-bit linear output");
    expect_close(xg.grad(), xr.grad(), bound, "16-bit linear input grad");
    expect_close(wg.grad(), wr.grad(), bound, "16-bit linear weight grad");
    expect_close(bg.grad(), br.grad(), bound, "16-bit linear bias grad");
  }
}

// TF32 only when asked for, and then within TF32's precision.
TEST_F(MatmulGpu, Tf32IsOptIn) {
  EXPECT_FALSE(cuda::allow_tf32());
  struct Restore {
    ~Restore() { cuda::set_allow_tf32(false); }
  } restore;
  cuda::set_allow_tf32(true);
  EXPECT_TRUE(cuda::allow_tf32());
  const Tensor a = rnd({512, 1024}, DType::Float32, 800), b = rnd({1024, 768}, DType::Float32, 801);
  const Tensor want = matmul(a.to(DType::Float64), b.to(DType::Float64));
  poison(want.numel(), DType::Float32);
  expect_close(matmul(a.to(gpu), b.to(gpu)), want, 1e-2, "TF32 matmul");
  // float64 is never affected.
  expect_close(matmul(a.to(DType::Float64).to(gpu), b.to(DType::Float64).to(gpu)), want, 1e-12, "float64 under TF32");
}

TEST_F(MatmulGpu, BadInputsNameTheOpAndTensor) {
  using testing::expect_error_mentions;
  const Tensor a = ones({2, 3}), g = ones({3, 4}).to(gpu);
  expect_error_mentions([&] { (void)matmul(a, g); }, {"matmul", "a", "on cpu", "b", "on cuda:0"});
  expect_error_mentions(
      [&] {
        (void)linear(ones({2, 4}).to(gpu), ones({5, 4}), Tensor());
      },
      {"linear", "input", "weight", "cuda:0", "cpu"});
  const Tensor i = zeros({2, 3}, {.dtype = DType::Int32}).to(gpu);
  expect_error_mentions([&] { (void)matmul(i, i.transpose(0, 1)); }, {"matmul", "a", "int32", "cuda:0"});
  expect_error_mentions([&] { (void)cuda_ops::matmul(i, i.transpose(0, 1), Shape{}, Tensor(), "matmul"); },
                        {"matmul", "int32", "float32, float64, bfloat16 or float16"});
  // 16-bit on the CPU stays refused, pointing at the conversion or at CUDA.
  const Tensor h = ones({2, 3}, {.dtype = DType::BFloat16});
  expect_error_mentions([&] { (void)matmul(h, h.transpose(0, 1)); }, {"matmul", "bfloat16", "CUDA"});
  // Mixed 16-bit dtypes on CUDA.
  expect_error_mentions(
      [&] {
        (void)linear(ones({2, 4}, {.dtype = DType::BFloat16}).to(gpu), ones({5, 4}, {.dtype = DType::Float16}).to(gpu));
      },
      {"linear", "weight", "float16"});
}

}  // namespace
}  // namespace strata
