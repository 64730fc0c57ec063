#pragma once
// Small helpers shared by the unit tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "strata/strata.h"

namespace strata::testing {

// True when a and b (CPU tensors) have the same dtype, shape and bytes.
inline bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor x = a.contiguous(), y = b.contiguous();
  return x.shape() == y.shape() && x.dtype() == y.dtype() &&
         std::memcmp(x.raw_data(), y.raw_data(), static_cast<size_t>(x.numel()) * dtype_size(x.dtype())) == 0;
}

// The message of the strata::Error that `f` throws (a test failure when it throws none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected strata::Error";
  return "<no error>";
}

// Expects `f` to throw a strata::Error whose message contains every needle.
template <class F>
void expect_error_mentions(F&& f, const std::vector<std::string>& needles) {
  const std::string msg = error_of(f);
  for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
}

inline void expect_contains(const std::string& msg, const std::string& part) {
  EXPECT_NE(msg.find(part), std::string::npos) << "'" << part << "' not in: " << msg;
}

// A float64 tensor with normal entries (no grad).
inline Tensor rand64(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return randn(shape, {.dtype = DType::Float64}, &g);
}

// max |a - b| / max |b|: relative error at the scale of the reference.
inline double rel_err(const Tensor& a, const Tensor& ref) {
  std::vector<double> va = a.to_vector<double>(), vb = ref.to_vector<double>();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < va.size(); ++i) {
    diff = std::max(diff, std::fabs(va[i] - vb[i]));
    scale = std::max(scale, std::fabs(vb[i]));
  }
  return scale == 0 ? diff : diff / scale;
}

// Element-wise |a - b| <= tol * (1 + |b|), stopping at the first mismatch.
inline void expect_near_vec(const std::vector<double>& a, const std::vector<double>& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], tol * (1 + std::fabs(b[i]))) << "element " << i;
}

}  // namespace strata::testing
