#pragma once
// The fixture of the GPU tests (label gpu): each test skips, naming why, where strata was
// built without CUDA or no GPU is visible, so the same binary runs everywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "strata/strata.h"
#include "test_util.h"

namespace strata::testing {

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::is_built()) GTEST_SKIP() << "strata was built without CUDA";
    if (!cuda::is_available()) GTEST_SKIP() << "no GPU visible";
  }
  const Device gpu = Device::cuda(0);
};

// Fills and frees blocks of the output's size with NaN, so the caching allocator hands the
// kernel poisoned memory: an element it skips shows as NaN.
inline void poison(int64_t numel, DType dtype) {
  const Shape shape{std::max<int64_t>(numel, 1)};
  for (int i = 0; i < 2; ++i) (void)full(shape, std::nan(""), {.dtype = dtype, .device = Device::cuda(0)});
}

// Largest distance in units in the last place between a and b (0: identical bits; NaNs of
// any payload count as equal to each other).
inline int64_t max_ulps(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  int64_t worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) && std::isnan(y[i])) continue;
    if (std::isnan(x[i]) != std::isnan(y[i])) return INT64_MAX;
    if (a.dtype() == DType::Float32) {
      const float fx = static_cast<float>(x[i]), fy = static_cast<float>(y[i]);
      int32_t ix, iy;
      std::memcpy(&ix, &fx, 4);
      std::memcpy(&iy, &fy, 4);
      worst = std::max<int64_t>(worst, std::llabs(int64_t{ix} - int64_t{iy}));
    } else {
      int64_t ix, iy;
      std::memcpy(&ix, &x[i], 8);
      std::memcpy(&iy, &y[i], 8);
      worst = std::max<int64_t>(worst, ix > iy ? ix - iy : iy - ix);
    }
  }
  return worst;
}

}  // namespace strata::testing
