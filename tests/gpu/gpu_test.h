#pragma once
// The fixture of the GPU tests (label gpu): each test skips, naming why, where strata was
// built without CUDA or no GPU is visible, so the same binary runs everywhere.
#include <gtest/gtest.h>

#include "strata/strata.h"

namespace strata::testing {

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::is_built()) GTEST_SKIP() << "strata was built without CUDA";
    if (!cuda::is_available()) GTEST_SKIP() << "no GPU visible";
  }
  const Device gpu = Device::cuda(0);
};

}  // namespace strata::testing
