// Tensor::index / index_put_ on a GPU against the CPU (label gpu): indexing copies values,
// so results and the gradients of distinct indices are bit-equal. The CUDA path composes
// strided views, embedding's row lookup (and its backward), where and cat.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "gpu/gpu_test.h"
#include "strata/strata.h"

namespace strata {
namespace {

using namespace indexing;
using TensorIndexGpu = testing::GpuTest;
using testing::same_bits;

Tensor longs(std::vector<int64_t> v, Shape shape) { return from_vector(v, shape); }

// The index expressions, built for tensors (and index tensors) on `device`.
std::vector<std::vector<TensorIndex>> expressions(Device device) {
  const Tensor ia = longs({2, 1}, {2, 1}).to(device), ib = longs({1, 3, -2}, {3}).to(device);
  const Tensor mask = longs({1, 0, 1, 1}, {4}).to(DType::Bool).to(device);
  return {{1, Slice(1, 4)},    {Slice(-3, None), Slice(None, None, 2), -1},
          {None, Ellipsis, 0}, {Slice(), ia, ib},
          {ia, Slice(), ib},   {mask},
          {mask, Slice(), 2}};
}

TEST_F(TensorIndexGpu, IndexAndGradientsEqualTheCpu) {
  Generator gen(3);
  const Tensor x = randn({4, 5, 6}, {.dtype = DType::Float64}, &gen);
  const auto cpu_ix = expressions(Device::cpu()), gpu_ix = expressions(gpu);
  for (size_t e = 0; e < cpu_ix.size(); ++e) {
    Tensor xc = x.clone().set_requires_grad(true);
    Tensor xg = x.to(gpu).detach().set_requires_grad(true);
    Tensor oc = xc.index(cpu_ix[e]), og = xg.index(gpu_ix[e]);
    EXPECT_TRUE(same_bits(oc, og.to(Device::cpu()))) << "expression " << e;
    Tensor w = randn(oc.shape(), {.dtype = DType::Float64}, &gen);
    sum(mul(oc, w)).backward();
    sum(mul(og, w.to(gpu))).backward();
    EXPECT_TRUE(same_bits(xc.grad(), xg.grad().to(Device::cpu()))) << "gradient of expression " << e;
  }
}

TEST_F(TensorIndexGpu, IndexPutAndGradientsEqualTheCpu) {
  Generator gen(4);
  const Tensor x = randn({4, 5, 6}, {.dtype = DType::Float64}, &gen);
  const auto cpu_ix = expressions(Device::cpu()), gpu_ix = expressions(gpu);
  for (size_t e = 0; e < cpu_ix.size(); ++e) {
    const Shape shape = x.index(cpu_ix[e]).shape();
    Tensor vc = randn(shape, {.dtype = DType::Float64}, &gen).set_requires_grad(true);
    Tensor vg = vc.detach().to(gpu).set_requires_grad(true);
    Tensor bc = x.clone().set_requires_grad(true), bg = x.to(gpu).detach().set_requires_grad(true);
    Tensor yc = mul(bc, 2.0), yg = mul(bg, 2.0);
    yc.index_put_(cpu_ix[e], vc);
    yg.index_put_(gpu_ix[e], vg);
    EXPECT_TRUE(same_bits(yc, yg.to(Device::cpu()))) << "expression " << e;
    Tensor w = randn(x.shape(), {.dtype = DType::Float64}, &gen);
    sum(mul(yc, w)).backward();
    sum(mul(yg, w.to(gpu))).backward();
    EXPECT_TRUE(same_bits(bc.grad(), bg.grad().to(Device::cpu()))) << "base gradient of expression " << e;
    EXPECT_TRUE(same_bits(vc.grad(), vg.grad().to(Device::cpu()))) << "value gradient of expression " << e;
  }
}

TEST_F(TensorIndexGpu, CompoundAssignmentOnTheGpu) {
  Tensor a = full({3}, 2.0, {.dtype = DType::Float32, .device = gpu});
  const uint64_t v = a.version();
  a += full({3}, 1.0, {.dtype = DType::Float32, .device = gpu});
  a *= 3.0;
  a /= 9.0;
  EXPECT_EQ(a.version(), v + 3);
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1.0F, 1.0F, 1.0F}));
  EXPECT_EQ((1.0 - a).to_vector<float>(), (std::vector<float>{0.0F, 0.0F, 0.0F}));
}

}  // namespace
}  // namespace strata
