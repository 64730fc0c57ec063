// Comparisons, where, masked_fill and cat on a GPU against their CPU twins (label gpu): the
// comparisons and selections run strata_kernels/common/compare_ops.h's functors on both devices and
// cat moves bits, so every result is equal bit for bit, in every dtype the CPU takes. Inputs
// are broadcast, strided (transposed views, on the host and on the device), of sizes that
// are no multiple of the block and once above 2^24 elements; the output's memory is poisoned
// before each launch (bytes 0xff: NaN in floats, no valid bool). Gradients of where,
// masked_fill, cat, stack and split equal the CPU's too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gpu/gpu_test.h"
#include "strata/strata.h"

namespace strata {
namespace {

using SelectGpu = testing::GpuTest;
using testing::same_bits;

// Frees blocks of the output's byte size filled with 0xff, so the caching allocator hands
// the kernel that memory: an element it skips shows as NaN, -1 or an invalid bool byte.
void poison_bytes(int64_t numel, DType dtype) {
  const int64_t words = std::max<int64_t>((numel * static_cast<int64_t>(dtype_size(dtype)) + 3) / 4, 1);
  for (int i = 0; i < 2; ++i) (void)full({words}, -1.0, {.dtype = DType::Int32, .device = Device::cuda(0)});
}

// Random values of `dtype` with many ties (small integers) and, in floats, NaN, inf and -0.0.
Tensor random_of(const Shape& shape, DType dtype, Generator* gen) {
  Tensor x = mul(randn(shape, {.dtype = DType::Float64}, gen), 3.0).to(DType::Int64).to(DType::Float64);
  if (dtype == DType::Bool) return gt(x, 0.0);
  if (dtype == DType::Float32 || dtype == DType::Float64) {
    const Tensor u = randn(shape, {.dtype = DType::Float64}, gen);
    x = where(gt(u, 2.0), scalar_tensor(std::nan(""), {.dtype = DType::Float64}), x);
    x = where(lt(u, -2.0), scalar_tensor(-INFINITY, {.dtype = DType::Float64}), x);
    x = where(eq(x, 0.0), scalar_tensor(-0.0, {.dtype = DType::Float64}), add(x, 0.25));
  }
  return x.to(dtype);
}

Tensor random_mask(const Shape& shape, Generator* gen) { return gt(randn(shape, {}, gen), 0.3); }

const std::vector<DType> kDtypes{DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::Bool};

// Shapes that broadcast: equal, one side broadcast, both sides, a scalar, empty, and one of
// 37 * 129 elements (no multiple of the block).
const std::vector<std::pair<Shape, Shape>> kShapes{{{5, 7, 3}, {5, 7, 3}}, {{5, 7, 3}, {7, 1}},
                                                   {{1, 7, 1}, {5, 1, 3}}, {{4}, {}},
                                                   {{0, 3}, {3}},          {{37, 129}, {37, 129}}};

using BinaryFn = std::function<Tensor(const Tensor&, const Tensor&)>;
const std::vector<std::pair<const char*, BinaryFn>> kCompares{
    {"eq", [](const Tensor& a, const Tensor& b) { return eq(a, b); }},
    {"ne", [](const Tensor& a, const Tensor& b) { return ne(a, b); }},
    {"lt", [](const Tensor& a, const Tensor& b) { return lt(a, b); }},
    {"le", [](const Tensor& a, const Tensor& b) { return le(a, b); }},
    {"gt", [](const Tensor& a, const Tensor& b) { return gt(a, b); }},
    {"ge", [](const Tensor& a, const Tensor& b) { return ge(a, b); }}};

std::string label(const char* op, DType dtype, const Shape& a, const Shape& b) {
  std::ostringstream s;
  s << op << " " << dtype << " " << a << " " << b;
  return s.str();
}

TEST_F(SelectGpu, ComparisonsEqualTheCpu) {
  for (DType dtype : kDtypes) {
    Generator gen(11);
    for (const auto& [sa, sb] : kShapes) {
      const Tensor a = random_of(sa, dtype, &gen), b = random_of(sb, dtype, &gen);
      const Tensor ga = a.to(gpu), gb = b.to(gpu);
      for (const auto& [name, f] : kCompares) {
        const Tensor want = f(a, b);
        poison_bytes(want.numel(), DType::Bool);
        const Tensor got = f(ga, gb);
        ASSERT_EQ(got.device(), gpu);
        EXPECT_TRUE(same_bits(got.to(Device::cpu()), want)) << label(name, dtype, sa, sb);
        EXPECT_TRUE(same_bits(f(gb, ga).to(Device::cpu()), f(b, a))) << label(name, dtype, sb, sa) << " swapped";
      }
    }
    // Strided: transposed views made on the host and on the device.
    const Tensor a = random_of({37, 129}, dtype, &gen), b = random_of({129, 37}, dtype, &gen);
    for (const auto& [name, f] : kCompares) {
      const Tensor want = f(a.transpose(0, 1), b);
      poison_bytes(want.numel(), DType::Bool);
      EXPECT_TRUE(same_bits(f(a.to(gpu).transpose(0, 1), b.to(gpu)).to(Device::cpu()), want))
          << label(name, dtype, a.shape(), b.shape()) << " strided";
      EXPECT_TRUE(same_bits(f(a.transpose(0, 1).to(gpu), b.to(gpu)).to(Device::cpu()), want))
          << label(name, dtype, a.shape(), b.shape()) << " strided copy";
    }
  }
}

TEST_F(SelectGpu, ScalarComparisonsEqualTheCpu) {
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int32, DType::Int64}) {
    Generator gen(12);
    const Tensor x = random_of({37, 129}, dtype, &gen), gx = x.to(gpu);
    for (double v : {0.0, 0.25, -1.75, 2.0, 1e30}) {
      EXPECT_TRUE(same_bits(eq(gx, v).to(Device::cpu()), eq(x, v))) << dtype << " " << v;
      EXPECT_TRUE(same_bits(ne(gx, v).to(Device::cpu()), ne(x, v))) << dtype << " " << v;
      EXPECT_TRUE(same_bits(lt(gx, v).to(Device::cpu()), lt(x, v))) << dtype << " " << v;
      EXPECT_TRUE(same_bits(le(gx, v).to(Device::cpu()), le(x, v))) << dtype << " " << v;
      EXPECT_TRUE(same_bits(gt(gx, v).to(Device::cpu()), gt(x, v))) << dtype << " " << v;
      EXPECT_TRUE(same_bits(ge(gx, v).to(Device::cpu()), ge(x, v))) << dtype << " " << v;
    }
  }
}

TEST_F(SelectGpu, WhereEqualsTheCpu) {
  // {cond, a, b}: broadcast in every combination, a scalar, empty.
  const std::vector<std::vector<Shape>> shapes{{{5, 7, 3}, {5, 7, 3}, {5, 7, 3}},
                                               {{5, 1, 3}, {7, 1}, {5, 7, 3}},
                                               {{7, 1}, {5, 1, 3}, {}},
                                               {{}, {4, 5}, {5}},
                                               {{0, 3}, {3}, {1, 3}},
                                               {{37, 129}, {37, 129}, {129}}};
  for (DType dtype : kDtypes) {
    Generator gen(13);
    for (const auto& s : shapes) {
      const Tensor c = random_mask(s[0], &gen), a = random_of(s[1], dtype, &gen), b = random_of(s[2], dtype, &gen);
      const Tensor want = where(c, a, b);
      poison_bytes(want.numel(), dtype);
      const Tensor got = where(c.to(gpu), a.to(gpu), b.to(gpu));
      EXPECT_TRUE(same_bits(got.to(Device::cpu()), want)) << "where " << dtype << " " << s[0] << s[1] << s[2];
    }
    // Strided condition and operand.
    const Tensor c = random_mask({129, 37}, &gen), a = random_of({129, 37}, dtype, &gen),
                 b = random_of({37, 129}, dtype, &gen);
    const Tensor want = where(c.transpose(0, 1), a.transpose(0, 1), b);
    poison_bytes(want.numel(), dtype);
    const Tensor got = where(c.to(gpu).transpose(0, 1), a.to(gpu).transpose(0, 1), b.to(gpu));
    EXPECT_TRUE(same_bits(got.to(Device::cpu()), want)) << "where strided " << dtype;
  }
}

TEST_F(SelectGpu, MaskedFillEqualsTheCpu) {
  for (DType dtype : kDtypes) {
    Generator gen(14);
    for (const auto& [sx, sm] : kShapes) {
      const Tensor x = random_of(sx, dtype, &gen), m = random_mask(sm, &gen);
      // Values that convert differently by dtype: a fraction, -0.0, NaN, beyond int32 (saturates).
      for (double v : {-2.5, -0.0, std::nan(""), 1e12}) {
        if ((dtype == DType::Int32 || dtype == DType::Int64 || dtype == DType::Bool) && std::isnan(v)) continue;
        const Tensor want = masked_fill(x, m, v);
        poison_bytes(want.numel(), dtype);
        const Tensor got = masked_fill(x.to(gpu), m.to(gpu), v);
        EXPECT_TRUE(same_bits(got.to(Device::cpu()), want)) << label("masked_fill", dtype, sx, sm) << " value " << v;
        // The mask broadcasting x too (as torch's out-of-place masked_fill).
        EXPECT_TRUE(same_bits(masked_fill(m.to(gpu), ne(x.to(gpu), x.to(gpu)), 1.0).to(Device::cpu()),
                              masked_fill(m, ne(x, x), 1.0)))
            << label("masked_fill bool", dtype, sx, sm);
      }
    }
    const Tensor x = random_of({129, 37}, dtype, &gen), m = random_mask({37, 1}, &gen);
    const Tensor want = masked_fill(x.transpose(0, 1), m, 7.0);
    poison_bytes(want.numel(), dtype);
    EXPECT_TRUE(same_bits(masked_fill(x.to(gpu).transpose(0, 1), m.to(gpu), 7.0).to(Device::cpu()), want))
        << "masked_fill strided " << dtype;
  }
}

TEST_F(SelectGpu, CatAndStackEqualTheCpu) {
  for (DType dtype : kDtypes) {
    Generator gen(15);
    const Tensor a = random_of({5, 3, 7}, dtype, &gen), b = random_of({5, 1, 7}, dtype, &gen),
                 c = random_of({7, 4, 5}, dtype, &gen).permute({2, 1, 0}), e = random_of({5, 0, 7}, dtype, &gen);
    for (int64_t dim : {1, -2}) {
      const Tensor want = cat({a, b, c, e}, dim);
      poison_bytes(want.numel(), dtype);
      const Tensor got = cat({a.to(gpu), b.to(gpu), c.to(gpu), e.to(gpu)}, dim);
      EXPECT_TRUE(same_bits(got.to(Device::cpu()), want)) << "cat " << dtype;
    }
    const Tensor dev_strided = random_of({7, 4, 5}, dtype, &gen), a2 = random_of({5, 3, 7}, dtype, &gen);
    EXPECT_TRUE(same_bits(cat({a.to(gpu), dev_strided.to(gpu).permute({2, 1, 0})}, 1).to(Device::cpu()),
                          cat({a, dev_strided.permute({2, 1, 0})}, 1)))
        << "cat permuted on the device " << dtype;
    for (int64_t dim : {0, 2, 3}) {
      EXPECT_TRUE(same_bits(cat({a.to(gpu), a.to(gpu)}, dim % 3).to(Device::cpu()), cat({a, a}, dim % 3))) << dtype;
      const Tensor want = stack({a, a2, a}, dim);
      poison_bytes(want.numel(), dtype);
      EXPECT_TRUE(same_bits(stack({a.to(gpu), a2.to(gpu), a.to(gpu)}, dim).to(Device::cpu()), want))
          << "stack " << dtype << " dim " << dim;
    }
  }
}

// Above 2^24 elements (32-bit indices would wrap), broadcast along the leading dimension.
TEST_F(SelectGpu, LargeInputsEqualTheCpu) {
  Generator gen(16);
  const int64_t rows = 4097, cols = 4099;  // 16,793,603 elements > 2^24
  const Tensor a = randn({rows, cols}, {}, &gen), b = randn({cols}, {}, &gen);
  const Tensor ga = a.to(gpu), gb = b.to(gpu);
  poison_bytes(rows * cols, DType::Bool);
  const Tensor mask = gt(ga, gb);
  EXPECT_TRUE(same_bits(mask.to(Device::cpu()), gt(a, b)));
  poison_bytes(rows * cols, DType::Float32);
  EXPECT_TRUE(same_bits(where(mask, ga, gb).to(Device::cpu()), where(gt(a, b), a, b)));
  poison_bytes(rows * cols, DType::Float32);
  EXPECT_TRUE(same_bits(masked_fill(ga, lt(gb, 0.0), -3.0).to(Device::cpu()), masked_fill(a, lt(b, 0.0), -3.0)));
  poison_bytes(rows * (cols + 7), DType::Float32);
  const Tensor tail = randn({rows, 7}, {}, &gen);
  EXPECT_TRUE(same_bits(cat({ga, tail.to(gpu)}, 1).to(Device::cpu()), cat({a, tail}, 1)));
}

// Backward on the device: where's and masked_fill's (a where and a sum over the broadcast
// dimensions), cat's and stack's (views of the gradient), split's (a cat).
TEST_F(SelectGpu, GradientsEqualTheCpu) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Generator gen(17);
    const Tensor c = random_mask({5, 1, 3}, &gen), a = randn({7, 1}, {.dtype = dtype}, &gen),
                 b = randn({5, 7, 3}, {.dtype = dtype}, &gen), g = randn({5, 7, 3}, {.dtype = dtype}, &gen);
    {
      Tensor ca = a.detach().set_requires_grad(true), cb = b.detach().set_requires_grad(true);
      Tensor xa = a.to(gpu).set_requires_grad(true), xb = b.to(gpu).set_requires_grad(true);
      where(c, ca, cb).backward(g);
      where(c.to(gpu), xa, xb).backward(g.to(gpu));
      EXPECT_TRUE(same_bits(xa.grad().to(Device::cpu()), ca.grad())) << "where a " << dtype;
      EXPECT_TRUE(same_bits(xb.grad().to(Device::cpu()), cb.grad())) << "where b " << dtype;
    }
    {
      Tensor cx = a.detach().set_requires_grad(true), xx = a.to(gpu).set_requires_grad(true);
      masked_fill(cx, c, 2.0).backward(g);
      masked_fill(xx, c.to(gpu), 2.0).backward(g.to(gpu));
      EXPECT_TRUE(same_bits(xx.grad().to(Device::cpu()), cx.grad())) << "masked_fill " << dtype;
    }
    {
      // The second input a strided (permuted) view of a leaf.
      const Tensor t = randn({3, 2, 5}, {.dtype = dtype}, &gen);
      Tensor ca = b.detach().set_requires_grad(true), cb = t.detach().set_requires_grad(true);
      Tensor xa = b.to(gpu).set_requires_grad(true), xb = t.to(gpu).set_requires_grad(true);
      const Tensor gc = randn({5, 9, 3}, {.dtype = dtype}, &gen);
      cat({ca, cb.permute({2, 1, 0})}, 1).backward(gc);
      cat({xa, xb.permute({2, 1, 0})}, 1).backward(gc.to(gpu));
      EXPECT_TRUE(same_bits(xa.grad().to(Device::cpu()), ca.grad())) << "cat a " << dtype;
      EXPECT_TRUE(same_bits(xb.grad().to(Device::cpu()), cb.grad())) << "cat b " << dtype;
    }
    {
      Tensor cx = b.detach().set_requires_grad(true), xx = b.to(gpu).set_requires_grad(true);
      const Tensor gs = randn({5, 2, 7, 3}, {.dtype = dtype}, &gen);
      stack({cx, mul(cx, 2.0)}, 1).backward(gs);
      stack({xx, mul(xx, 2.0)}, 1).backward(gs.to(gpu));
      EXPECT_TRUE(same_bits(xx.grad().to(Device::cpu()), cx.grad())) << "stack " << dtype;
    }
    {
      Tensor cx = b.detach().set_requires_grad(true), xx = b.to(gpu).set_requires_grad(true);
      const std::vector<Tensor> cp = split(cx, std::vector<int64_t>{2, 4, 1}, 1);
      const std::vector<Tensor> xp = split(xx, std::vector<int64_t>{2, 4, 1}, 1);
      const Tensor w = randn({5, 4, 3}, {.dtype = dtype}, &gen);
      add(sum(mul(cp[0], 3.0)), sum(mul(cp[1], w))).backward();  // cp[2] gets no gradient: zeros
      add(sum(mul(xp[0], 3.0)), sum(mul(xp[1], w.to(gpu)))).backward();
      EXPECT_TRUE(same_bits(xx.grad().to(Device::cpu()), cx.grad())) << "split " << dtype;
    }
  }
}

}  // namespace
}  // namespace strata
