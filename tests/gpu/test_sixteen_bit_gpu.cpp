// The 16-bit kernels on a GPU (label gpu; strata_kernels/common/storage16.h): each op on
// 16-bit CUDA data equals, bit for bit, the same op on the widened data through the GPU's
// float32 kernel, rounded once (the values autocast's emulation gave), forward and backward,
// with no conversion counted; and equals the CPU's 16-bit result (the same kernel source)
// where the float32 op is bit-equal across devices (every op here but the log-sum-exp ones).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "gpu/gpu_test.h"
#include "strata/strata.h"

namespace strata {
namespace {

using SixteenBitGpu = testing::GpuTest;
using testing::same_bits;

struct Op {
  std::string name;
  std::function<Tensor(const Tensor&)> f;
  bool cpu_equal;  // the float32 op is bit-equal on CPU and GPU
};

Tensor rounded(const Tensor& t, DType dtype) { return t.dtype() == dtype ? t : t.to(dtype); }

// op(x16) on the GPU against op(widened x16) on the GPU rounded, and (when cpu_equal) the
// CPU's op(x16); the input gradient likewise.
void check(const Op& op, const Tensor& x32, const Tensor& g32, DType dt, Device gpu) {
  SCOPED_TRACE(op.name + " " + std::string(dtype_name(dt)));
  const Tensor x = x32.to(dt).to(gpu).detach().set_requires_grad(true);
  const Tensor xw = x.detach().to(DType::Float32).set_requires_grad(true);
  autocast::reset_counters();
  const Tensor y = op.f(x);
  const Tensor g = g32.to(y.dtype()).to(gpu);
  y.backward(g);
  EXPECT_EQ(autocast::counters().conversions, 0);
  const Tensor yw = op.f(xw);
  yw.backward(g.to(DType::Float32));
  EXPECT_TRUE(same_bits(y.to(Device::cpu()), rounded(yw.detach(), y.dtype()).to(Device::cpu()))) << "output";
  EXPECT_TRUE(same_bits(x.grad().to(Device::cpu()), rounded(xw.grad(), dt).to(Device::cpu()))) << "gradient";
  if (!op.cpu_equal) return;
  const Tensor xc = x32.to(dt).detach().set_requires_grad(true);
  const Tensor yc = op.f(xc);
  yc.backward(g.to(Device::cpu()));
  EXPECT_TRUE(same_bits(y.to(Device::cpu()), yc.detach())) << "output against the CPU";
  EXPECT_TRUE(same_bits(x.grad().to(Device::cpu()), xc.grad())) << "gradient against the CPU";
}

TEST_F(SixteenBitGpu, OpsOn16BitDataEqualTheWidenedFloat32OpRoundedOnce) {
  Generator gen(71);
  // 300 rows of 1000: several warps' rows, a row not a multiple of 32.
  const Tensor x = add(mul(randn({300, 1000}, {}, &gen), 3.0), 0.5), g = randn({300, 1000}, {}, &gen);
  const Tensor w = add(randn({1000}, {}, &gen), 1.0).to(gpu), b = randn({1000}, {}, &gen).to(gpu);
  const Tensor wc = w.to(Device::cpu()), bc = b.to(Device::cpu());
  // The second operand of add/mul: multiples of 1/8 below 25 in magnitude, exact in bfloat16
  // and float16, so the 16-bit pair and the widened pair hold the same values.
  const Tensor other = mul(randint(-200, 200, {300, 1000}, {.dtype = DType::Int64}, &gen).to(DType::Float32), 0.125);
  auto on = [](const Tensor& t, const Tensor& like) { return t.to(like.device()); };
  const RotaryTables tab = rotary_tables(300, 1000);
  const std::vector<Op> ops = {
      {"layer_norm", [&](const Tensor& t) { return layer_norm(t, on(wc, t), on(bc, t)); }, true},
      {"rms_norm", [&](const Tensor& t) { return rms_norm(t, on(wc, t)); }, true},
      {"gelu", [](const Tensor& t) { return gelu(t); }, true},
      {"silu", [](const Tensor& t) { return silu(t); }, true},
      {"softmax", [](const Tensor& t) { return softmax(t, -1); }, true},
      {"log_softmax", [](const Tensor& t) { return log_softmax(t, -1); }, false},
      {"add (16-bit pair)", [&](const Tensor& t) { return add(t, on(other, t).to(t.dtype())); }, true},
      {"mul (16-bit pair)", [&](const Tensor& t) { return mul(t, on(other, t).to(t.dtype())); }, true},
      {"dropout",
       [](const Tensor& t) {
         Generator drop(9);
         return dropout(t, 0.25, true, &drop);
       },
       true},
      {"rotary",
       [&](const Tensor& t) {
         return rotary_embedding(t.view({1, 300, 1000}), on(tab.cos, t), on(tab.sin, t)).view({300, 1000});
       },
       true},
  };
  for (const DType dt : {DType::BFloat16, DType::Float16})
    for (const Op& op : ops) check(op, x, g, dt, gpu);
}

// The residual add under 16-bit activations (float32 stream + 16-bit branch -> float32) and
// cross_entropy of 16-bit logits (float32 loss), on the GPU against the widened op.
TEST_F(SixteenBitGpu, ResidualAddAndCrossEntropyRead16Bit) {
  Generator gen(72);
  const Tensor stream = randn({64, 768}, {}, &gen).to(gpu), branch = randn({64, 768}, {}, &gen);
  for (const DType dt : {DType::BFloat16, DType::Float16}) {
    const Tensor b16 = branch.to(dt).to(gpu);
    Tensor sum16;
    {
      autocast::Scope scope(dt, {.activations = true});
      sum16 = add(stream, b16);
    }
    ASSERT_EQ(sum16.dtype(), DType::Float32);
    EXPECT_TRUE(same_bits(sum16.to(Device::cpu()), add(stream, b16.to(DType::Float32)).to(Device::cpu())));
    const Tensor logits = mul(randn({96, 50304}, {}, &gen), 2.0).to(dt).to(gpu);
    const Tensor targets = randint(0, 50304, {96}, {.dtype = DType::Int64}, &gen).to(gpu);
    const Tensor l16 = logits.detach().set_requires_grad(true), lw = logits.to(DType::Float32).set_requires_grad(true);
    const Tensor loss16 = cross_entropy(l16, targets), loss32 = cross_entropy(lw, targets);
    ASSERT_EQ(loss16.dtype(), DType::Float32);
    EXPECT_EQ(loss16.item(), loss32.item());
    loss16.backward();
    loss32.backward();
    EXPECT_TRUE(same_bits(l16.grad().to(Device::cpu()), lw.grad().to(dt).to(Device::cpu())));
  }
}

}  // namespace
}  // namespace strata
