// Optimizer state across devices (label gpu): a state_dict saved from CUDA parameters and
// held on the CPU (as a checkpoint reads it back) loads into an optimizer of CUDA
// parameters, moved to their device, and the resumed steps equal the uninterrupted ones.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "gpu/gpu_test.h"
#include "strata/strata.h"

namespace strata {
namespace {

using OptimizerStateGpu = testing::GpuTest;
using testing::same_bits;

// Proves: AdamW resumed from CPU-held state on CUDA parameters continues bit for bit.
TEST_F(OptimizerStateGpu, CpuStateLoadsIntoCudaParameters) {
  Generator gen(81);
  const Tensor start = randn({5, 7}, {}, &gen);
  const Tensor grad = randn({5, 7}, {}, &gen);
  auto make = [&] {
    Tensor p = start.to(gpu);
    p.set_requires_grad(true);
    return p;
  };
  auto step = [&](Tensor& p, optim::AdamW& opt) {
    p.set_grad(grad.to(gpu));
    opt.step();
  };
  Tensor straight = make(), resumed = make();
  optim::AdamW a({straight}, {.lr = 1e-2, .weight_decay = 0.1});
  optim::AdamW b({resumed}, {.lr = 1e-2, .weight_decay = 0.1});
  step(straight, a);
  step(resumed, b);
  StateDict on_cpu;
  for (const auto& [key, value] : b.state_dict()) on_cpu[key] = value.to(Device::cpu());
  optim::AdamW c({resumed}, {.lr = 1e-2, .weight_decay = 0.1});
  c.load_state_dict(on_cpu);
  for (const auto& [key, value] : c.state_dict()) {
    if (value.numel() > 1) {
      EXPECT_TRUE(value.device().is_cuda()) << key << " stayed on " << value.device();
    }
  }
  step(straight, a);
  step(resumed, c);
  EXPECT_TRUE(same_bits(resumed.to(Device::cpu()), straight.to(Device::cpu())));
}

}  // namespace
}  // namespace strata
