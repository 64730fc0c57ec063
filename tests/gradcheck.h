#pragma once
// Finite-difference gradient checking in float64 for op tests.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "strata/strata.h"

namespace strata::testing {

// Checks the autograd gradient of sum(f(inputs) * w), w random, against central
// differences for every element of every floating input that requires grad.
inline void expect_gradients_match(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                                   std::vector<Tensor> inputs, double eps = 1e-6, double atol = 1e-6,
                                   double rtol = 1e-5) {
  for (Tensor& t : inputs) ASSERT_TRUE(!is_floating(t.dtype()) || t.dtype() == DType::Float64) << "use float64";
  Tensor out = f(inputs);
  Generator gen(1234);
  Tensor w = randn(out.shape(), {.dtype = DType::Float64}, &gen);
  auto objective = [&]() {
    NoGradGuard no_grad;
    return sum(mul(f(inputs), w)).item();
  };
  sum(mul(out, w)).backward();
  for (size_t k = 0; k < inputs.size(); ++k) {
    Tensor& x = inputs[k];
    if (!x.requires_grad()) continue;
    ASSERT_TRUE(x.grad().defined()) << "input " << k << " received no gradient";
    ASSERT_EQ(x.grad().shape(), x.shape());
    std::vector<double> analytic = x.grad().to_vector<double>();
    ASSERT_TRUE(x.is_contiguous());
    double* p = x.data<double>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double saved = p[i];
      p[i] = saved + eps;
      const double plus = objective();
      p[i] = saved - eps;
      const double minus = objective();
      p[i] = saved;
      const double numeric = (plus - minus) / (2 * eps);
      EXPECT_NEAR(analytic[static_cast<size_t>(i)], numeric, atol + rtol * std::fabs(numeric))
          << "input " << k << " element " << i << " of shape " << x.shape();
    }
  }
}

// A float64 leaf with normal entries.
inline Tensor leaf64(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, {.dtype = DType::Float64}, &gen).set_requires_grad(true);
}

}  // namespace strata::testing
