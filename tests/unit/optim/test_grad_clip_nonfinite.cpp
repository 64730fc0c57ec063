// clip_grad_norm's error_if_nonfinite (torch's): a nan or inf total norm throws naming the
// norm and leaves the gradients as they were; without the option the norm is returned.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using strata::testing::error_of;
using strata::testing::expect_contains;

namespace {

std::vector<Tensor> params_with_grads(float poison) {
  Tensor a = zeros({2, 2}).set_requires_grad(true);
  Tensor b = zeros({3}).set_requires_grad(true);
  a.set_grad(from_vector(std::vector<float>{3, 4, 0, 0}, {2, 2}));
  b.set_grad(from_vector(std::vector<float>{0, poison, 0}, {3}));
  return {a, b};
}

std::vector<float> grads_of(const std::vector<Tensor>& params) {
  std::vector<float> out;
  for (const Tensor& p : params) {
    const std::vector<float> g = p.grad().to_vector<float>();
    out.insert(out.end(), g.begin(), g.end());
  }
  return out;
}

TEST(GradClipNonFinite, ErrorNamesTheNormAndLeavesTheGradients) {
  for (float poison : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    const std::vector<Tensor> params = params_with_grads(poison);
    const std::vector<float> before = grads_of(params);
    const std::string msg = error_of([&] { optim::clip_grad_norm(params, 1.0, {.error_if_nonfinite = true}); });
    expect_contains(msg, "clip_grad_norm: the total norm of the gradients is ");
    expect_contains(msg, std::isnan(poison) ? "nan" : "inf");
    expect_contains(msg, "non-finite");
    const std::vector<float> after = grads_of(params);
    ASSERT_EQ(after.size(), before.size());
    for (size_t i = 0; i < after.size(); ++i) {
      if (std::isnan(before[i])) {
        EXPECT_TRUE(std::isnan(after[i]));
      } else {
        EXPECT_EQ(after[i], before[i]) << "gradient element " << i << " was changed";
      }
    }
    // Without the option: the same norm comes back, gradients unchanged as before.
    const double norm = optim::clip_grad_norm(params, 1.0);
    EXPECT_EQ(std::isnan(norm), std::isnan(poison));
    EXPECT_FALSE(std::isfinite(norm));
  }
}

TEST(GradClipNonFinite, AFiniteNormClipsAsWithoutTheOption) {
  const std::vector<Tensor> params = params_with_grads(0.0f);  // norm 5
  const double norm = optim::clip_grad_norm(params, 1.0, {.error_if_nonfinite = true});
  EXPECT_EQ(norm, 5.0);
  const std::vector<Tensor> plain = params_with_grads(0.0f);
  optim::clip_grad_norm(plain, 1.0);
  EXPECT_EQ(grads_of(params), grads_of(plain));
  EXPECT_LT(grads_of(params)[1], 4.0f);  // it did clip
}

}  // namespace
