#pragma once
// Checking collective results against values each rank computes on its own
// (test_collectives.cpp, test_collective_paths.cpp, test_shm.cpp).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "distributed/dist_test_util.h"

namespace strata::test {

inline const std::vector<dist::ReduceOp>& all_ops() {
  using dist::ReduceOp;
  static const std::vector<ReduceOp> v{ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min, ReduceOp::Product};
  return v;
}

// Same dtype, size and bytes: for results that must be exact (or bitwise reproducible).
inline bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.numel() == b.numel() &&
         std::memcmp(a.raw_data(), b.raw_data(), static_cast<size_t>(a.nbytes())) == 0;
}

// Relative tolerance of a result in `d` (16-bit types round the inputs and the result).
inline double tolerance(DType d) {
  switch (d) {
    case DType::BFloat16: return 1e-2;
    case DType::Float16: return 1e-3;
    case DType::Float32: return 1e-6;
    default: return 1e-12;
  }
}

// Rank r's value at index i: small integers, exact in every dtype, products stay small;
// ranks differ at every index, and which rank holds the max changes with i.
inline double value(int r, int64_t i) { return static_cast<double>(r + 1 + (i * 7 + r) % 3); }

// What reducing value(0, i) .. value(n - 1, i) with `op` gives.
inline double reduce_all(dist::ReduceOp op, int n, int64_t i) {
  using dist::ReduceOp;
  double acc = value(0, i);
  for (int r = 1; r < n; ++r) {
    double v = value(r, i);
    if (op == ReduceOp::Sum || op == ReduceOp::Avg) acc += v;
    if (op == ReduceOp::Max) acc = std::max(acc, v);
    if (op == ReduceOp::Min) acc = std::min(acc, v);
    if (op == ReduceOp::Product) acc *= v;
  }
  return op == ReduceOp::Avg ? acc / n : acc;
}

// Checks t[i] against want(begin + i) within tolerance(t.dtype()); reports at most the first
// five mismatches.
template <class F>
void expect_values(const Tensor& t, int64_t begin, F want, const std::string& what) {
  std::vector<double> got = t.to_vector<double>();
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i) {
    double w = want(begin + static_cast<int64_t>(i));
    if (std::abs(got[i] - w) > tolerance(t.dtype()) * std::max(1.0, std::abs(w))) {
      ADD_FAILURE() << what << " element " << begin + static_cast<int64_t>(i) << ": got " << got[i] << ", want " << w;
      ++bad;
    }
  }
}

// The same against a list of the expected values (and its length).
inline void expect_values(const Tensor& t, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size())) << what;
  expect_values(
      t, 0, [&](int64_t i) { return want[static_cast<size_t>(i)]; }, what);
}

// "float32 sum M=1003"
inline std::string name_of(DType d, dist::ReduceOp op, int64_t m) {
  return std::string(dtype_name(d)) + " " + std::string(dist::reduce_op_name(op)) + " M=" + std::to_string(m);
}

}  // namespace strata::test
