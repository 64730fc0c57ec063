#pragma once
// all_to_all_v of CUDA tensors through `group` (NCCL natively, MPI by host staging): rank r
// sends 1 + (r + q) % 2 rows of 2 elements to rank q; the split sizes are exchanged on the
// group's device and the differentiable form sends the gradient back.
#include <gtest/gtest.h>

#include <vector>

#include "strata/distributed/split_exchange.h"
#include "strata/ops/elementwise.h"
#include "strata/ops/reduce.h"
#include "strata/parallel/token_exchange.h"
#include "strata/tensor/factory.h"

namespace strata::test {

inline void check_all_to_all_v_on_gpu(dist::ProcessGroup& group, Device gpu) {
  const int n = group.size(), r = group.rank();
  auto rows = [](int src, int dst) { return static_cast<int64_t>(1 + (src + dst) % 2); };
  std::vector<int64_t> in_splits, expect_out;
  std::vector<double> mine, expect;
  for (int q = 0; q < n; ++q) {
    in_splits.push_back(rows(r, q));
    expect_out.push_back(rows(q, r));
    for (int64_t k = 0; k < 2 * rows(r, q); ++k) mine.push_back(100.0 * r + 10.0 * q + static_cast<double>(k));
    for (int64_t k = 0; k < 2 * rows(q, r); ++k) expect.push_back(100.0 * q + 10.0 * r + static_cast<double>(k));
  }
  const std::vector<int64_t> out_splits = dist::exchange_split_sizes(group, in_splits);
  EXPECT_EQ(out_splits, expect_out);
  const auto in_rows = static_cast<int64_t>(mine.size() / 2), out_rows = static_cast<int64_t>(expect.size() / 2);
  for (DType d : {DType::Float32, DType::BFloat16, DType::Int64}) {
    const Tensor in = from_vector(mine, {in_rows, 2}).to(d).to(gpu);
    Tensor out = zeros({out_rows, 2}, {.dtype = d, .device = gpu});
    group.reset_stats();
    group.all_to_all_v(out, in, out_splits, in_splits)->wait();
    EXPECT_EQ(out.device(), gpu);
    EXPECT_EQ(out.to(DType::Float64).to_vector<double>(), expect) << d;
    EXPECT_EQ(group.stats().at(dist::OpType::AllToAllV).bytes, static_cast<uint64_t>(in.nbytes())) << d;
    EXPECT_EQ(group.stats().at(dist::OpType::AllToAllV).received_bytes, static_cast<uint64_t>(out.nbytes())) << d;
  }
  // A received row weighs 10 * receiver + sender + 1: a row's gradient says where it went.
  Tensor x = from_vector(mine, {in_rows, 2}).to(gpu).set_requires_grad(true);
  std::vector<double> weight, expect_grad;
  for (int q = 0; q < n; ++q) {
    for (int64_t k = 0; k < 2 * rows(q, r); ++k) weight.push_back(10.0 * r + q + 1.0);
    for (int64_t k = 0; k < 2 * rows(r, q); ++k) expect_grad.push_back(10.0 * q + r + 1.0);
  }
  Tensor y = parallel::all_to_all_v(x, group, in_splits, out_splits);
  sum(y * from_vector(weight, {out_rows, 2}).to(gpu)).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), expect_grad);  // float64: exact
}

}  // namespace strata::test
