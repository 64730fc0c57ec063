// round/floor/ceil/trunc/sign, isnan/isinf/isfinite, min/argmin, logsumexp, tril/triu and
// one_hot on a GPU against their CPU twins (label gpu). Both run the shared functions of
// strata_kernels/common/ (rounding_ops.h, line_min_logsumexp.h, triangle.h), so every result
// is equal bit for bit, except logsumexp, which calls the platform's exp and log (CUDA's
// device math vs glibc, a few ulps apart in double before the float64 sum, so its float64
// result may differ by a few ulps; float32 rounds that double once, so by at most 1 ulp).
// Inputs hold ties, NaN, infinities and -0.0 (a NaN comes back from round/floor/ceil/trunc
// with its own bits on both devices); strided views and leading batch dimensions too;
// outputs are poisoned with NaN before each launch. Gradients are compared the same way.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gpu/gpu_test.h"
#include "strata/strata.h"

namespace strata {
namespace {

using MathOpsGpu = testing::GpuTest;
using testing::max_ulps;
using testing::poison;
using testing::same_bits;

Tensor host(const Tensor& t) { return t.to(Device::cpu()); }

struct RoundingCase {
  const char* name;
  Tensor (*op)(const Tensor&);
};

// Normal values times 3 with half-way values, signed zeros, NaN and infinities mixed in, and
// (small integers) ties.
Tensor specials(const Shape& shape, DType dtype, uint64_t seed) {
  Generator gen(seed);
  Tensor x = mul(randn(shape, {.dtype = DType::Float64}, &gen), 3.0);
  const std::vector<double> put = {0.5, 1.5, 2.5, -0.5, -2.5, -0.0, std::nan(""), INFINITY, -INFINITY, 2, 2, -1};
  double* p = x.data<double>();
  for (size_t i = 0; i < put.size() && static_cast<int64_t>(i * 7) < x.numel(); ++i) p[i * 7] = put[i];
  return x.to(dtype);
}

// Bit-for-bit agreement of a unary op on x (a CPU tensor) and on its GPU copy (and views).
template <class Op>
void expect_unary_same(const Tensor& x, Op op, const std::string& what) {
  const Tensor want = op(x);
  poison(want.numel(), DType::Float64);
  EXPECT_TRUE(same_bits(host(op(x.to(Device::cuda(0)))), want)) << what;
  if (x.dim() == 2) {
    const Tensor xt = x.transpose(0, 1);
    EXPECT_TRUE(same_bits(host(op(x.to(Device::cuda(0)).transpose(0, 1))), op(xt))) << what << " transposed";
  }
}

TEST_F(MathOpsGpu, RoundingAndClassTestsEqualTheCpuBitForBit) {
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int32, DType::Int64}) {
    const Tensor x = is_floating(dtype) ? specials({37, 53}, dtype, 1) : specials({37, 53}, DType::Float64, 1);
    const Tensor xi = is_floating(dtype) ? x : where(isfinite(x), x, zeros_like(x)).to(dtype);
    const std::string t(dtype_name(dtype));
    expect_unary_same(
        xi, [](const Tensor& a) { return round(a); }, "round " + t);
    expect_unary_same(
        xi, [](const Tensor& a) { return floor(a); }, "floor " + t);
    expect_unary_same(
        xi, [](const Tensor& a) { return ceil(a); }, "ceil " + t);
    expect_unary_same(
        xi, [](const Tensor& a) { return trunc(a); }, "trunc " + t);
    expect_unary_same(
        xi, [](const Tensor& a) { return sign(a); }, "sign " + t);
    expect_unary_same(
        xi, [](const Tensor& a) { return isnan(a); }, "isnan " + t);
    expect_unary_same(
        xi, [](const Tensor& a) { return isinf(a); }, "isinf " + t);
    expect_unary_same(
        xi, [](const Tensor& a) { return isfinite(a); }, "isfinite " + t);
  }
  const Tensor b = gt(specials({9, 4}, DType::Float32, 2), 0.0);
  expect_unary_same(
      b, [](const Tensor& a) { return isfinite(a); }, "isfinite bool");
  // The zero gradient on the device.
  Tensor leaf = specials({5, 6}, DType::Float32, 3).to(gpu).detach().set_requires_grad(true);
  sum(floor(leaf)).backward();
  EXPECT_EQ(host(leaf.grad()).to_vector<double>(), std::vector<double>(30, 0.0));
}

// NaNs of other signs and payloads than std::nan's, as bit patterns.
template <class T, class Bits>
Tensor nans_from_bits(const std::vector<Bits>& bits) {
  std::vector<T> v(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) std::memcpy(&v[i], &bits[i], sizeof(T));
  return from_vector(v, {static_cast<int64_t>(v.size())});
}

// Proves: round/floor/ceil/trunc hand a NaN back with its own bits (sign, payload) on the GPU
// as on the CPU (the GPU's float32 rounding instructions would return their canonical NaN).
TEST_F(MathOpsGpu, RoundingKeepsTheBitsOfANan) {
  const Tensor f32 = nans_from_bits<float, uint32_t>({0x7fc01234u, 0xffc00001u, 0x7fc00000u});
  const Tensor f64 = nans_from_bits<double, uint64_t>({0x7ff8000000001234ull, 0xfff8000000000001ull});
  for (const Tensor& x : {f32, f64}) {
    for (RoundingCase c : {RoundingCase{"round", [](const Tensor& a) { return round(a); }},
                           RoundingCase{"floor", [](const Tensor& a) { return floor(a); }},
                           RoundingCase{"ceil", [](const Tensor& a) { return ceil(a); }},
                           RoundingCase{"trunc", [](const Tensor& a) { return trunc(a); }}}) {
      EXPECT_TRUE(same_bits(c.op(x), x)) << c.name << " " << x.dtype() << " on the CPU";
      EXPECT_TRUE(same_bits(host(c.op(x.to(gpu))), x)) << c.name << " " << x.dtype() << " on the GPU";
    }
  }
}

TEST_F(MathOpsGpu, MinAndArgminEqualTheCpuBitForBit) {
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int32, DType::Int64}) {
    for (const Shape& shape : {Shape{1}, Shape{300}, Shape{5, 257}, Shape{33, 3, 70}, Shape{2, 3, 4, 5}}) {
      Generator gen(7);
      const Tensor base = randint(-4, 5, shape, {.dtype = DType::Int64}, &gen).to(DType::Float64);  // ties
      const Tensor x = is_floating(dtype) ? where(lt(rand(shape, {.dtype = DType::Float64}, &gen), 0.02),
                                                  full(shape, std::nan(""), {.dtype = DType::Float64}), base)
                                                .to(dtype)
                                          : base.to(dtype);
      const Tensor xg = x.to(gpu);
      for (int64_t dim = 0; dim < x.dim(); ++dim) {
        const ValuesIndices m = min_with_indices(x, dim, true);
        poison(m.values.numel(), DType::Float64);
        const ValuesIndices mg = min_with_indices(xg, dim, true);
        EXPECT_TRUE(same_bits(host(mg.values), m.values)) << dtype_name(dtype) << " " << shape << " dim " << dim;
        EXPECT_TRUE(same_bits(host(mg.indices), m.indices)) << dtype_name(dtype) << " " << shape << " dim " << dim;
        EXPECT_TRUE(same_bits(host(argmin(xg, dim)), argmin(x, dim))) << shape << " dim " << dim;
      }
      if (x.dim() == 2) {
        EXPECT_TRUE(same_bits(host(min(xg.transpose(0, 1), 1)), min(x.transpose(0, 1), 1)));
      }
    }
  }
  // The gradient lands on the CPU's positions.
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Generator gen(8);
    const Tensor x = randint(-2, 3, {6, 9}, {.dtype = DType::Int64}, &gen).to(dtype);
    Tensor a = x.clone().set_requires_grad(true), b = x.to(gpu).detach().set_requires_grad(true);
    sum(mul(min(a, 1), 3.0)).backward();
    sum(mul(min(b, 1), 3.0)).backward();
    EXPECT_TRUE(same_bits(host(b.grad()), a.grad()));
  }
}

TEST_F(MathOpsGpu, LogsumexpWithinUlpsOfTheCpu) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    const int64_t bound = dtype == DType::Float32 ? 1 : 8;
    Generator gen(9);
    const Tensor x = mul(randn({6, 33, 70}, {.dtype = dtype}, &gen), 2.0);  // |logsumexp| < 16
    const Tensor xg = x.to(gpu);
    for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{{0}, {1}, {2}, {0, 2}, {0, 1, 2}, {}}) {
      const Tensor want = logsumexp(x, dims, true);
      poison(want.numel(), DType::Float64);
      EXPECT_LE(max_ulps(host(logsumexp(xg, dims, true)), want), bound) << dtype_name(dtype) << " " << dims.size();
    }
    // Rows of -inf, +inf, NaN and an empty reduction agree exactly (no library math reaches them).
    const Tensor s = from_vector(std::vector<double>{-INFINITY, -INFINITY, 1, INFINITY, std::nan(""), 2}, {3, 2});
    EXPECT_TRUE(same_bits(host(logsumexp(s.to(dtype).to(gpu), {1})), logsumexp(s.to(dtype), {1})));
    EXPECT_TRUE(same_bits(host(logsumexp(zeros({3, 0}, {.dtype = dtype, .device = gpu}), {1})),
                          logsumexp(zeros({3, 0}, {.dtype = dtype}), {1})));
    // Gradients exp(x - out): an out `bound` ulps apart (ulps of |out| < 16, i.e. <= 2^4 ulps
    // of a value in [1/2, 1)) moves x - out, so exp(x - out), by up to 16 * bound ulps of
    // the gradient; the library exp adds a few more.
    Tensor a = x.clone().set_requires_grad(true), b = xg.detach().set_requires_grad(true);
    sum(logsumexp(a, {2})).backward();
    sum(logsumexp(b, {2})).backward();
    EXPECT_LE(max_ulps(host(b.grad()), a.grad()), 16 * bound + 4);
  }
}

TEST_F(MathOpsGpu, TriangleAndOneHotEqualTheCpuBitForBit) {
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int64, DType::Int32, DType::BFloat16, DType::Bool}) {
    const Tensor f = specials({3, 17, 29}, DType::Float32, 10);
    const Tensor x = dtype == DType::Bool ? gt(f, 0.0) : f.to(dtype);
    const Tensor xg = x.to(gpu);
    for (int64_t d : {-20, -3, -1, 0, 1, 5, 40}) {
      poison(x.numel(), DType::Float64);
      EXPECT_TRUE(same_bits(host(tril(xg, d)), tril(x, d))) << dtype_name(dtype) << " tril " << d;
      EXPECT_TRUE(same_bits(host(triu(xg, d)), triu(x, d))) << dtype_name(dtype) << " triu " << d;
      EXPECT_TRUE(same_bits(host(tril(xg.transpose(1, 2), d)), tril(x.transpose(1, 2), d))) << "transposed " << d;
    }
  }
  Tensor a = specials({4, 5}, DType::Float64, 11).set_requires_grad(true);
  Tensor b = a.detach().to(gpu).set_requires_grad(true);
  sum(mul(triu(a, 1), 2.0)).backward();
  sum(mul(triu(b, 1), 2.0)).backward();
  EXPECT_TRUE(same_bits(host(b.grad()), a.grad()));
  Generator gen(12);
  const Tensor idx = randint(0, 10, {7, 13}, {.dtype = DType::Int64}, &gen);
  EXPECT_TRUE(same_bits(host(one_hot(idx.to(gpu))), one_hot(idx)));
  EXPECT_TRUE(same_bits(host(one_hot(idx.to(gpu).transpose(0, 1), 12)), one_hot(idx.transpose(0, 1), 12)));
  // The range check reads the device's indices: the same error as on the CPU.
  const Tensor bad = from_vector(std::vector<int64_t>{0, 9}, {2}).to(gpu);
  try {
    (void)one_hot(bad, 5);
    ADD_FAILURE() << "one_hot accepted index 9 for 5 classes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index 9 at position [1]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace strata
