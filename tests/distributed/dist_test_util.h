#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "strata/core/error.h"
#include "strata/distributed/init.h"
#include "strata/tensor/factory.h"

namespace strata::test {

inline const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> v{DType::Float32, DType::Float64, DType::BFloat16,
                                    DType::Float16, DType::Int32,   DType::Int64};
  return v;
}

// A tensor of `dtype` holding `values` (converted).
inline Tensor make(const std::vector<double>& values, DType dtype) {
  return from_vector(values, {static_cast<int64_t>(values.size())}).to(dtype);
}

// The message of the strata::Error that `f` throws ("" when it does not throw).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Fails the test unless `message` contains `part`.
inline void expect_contains(const std::string& message, const std::string& part) {
  EXPECT_NE(message.find(part), std::string::npos) << "expected \"" << part << "\" in: " << message;
}

}  // namespace strata::test
