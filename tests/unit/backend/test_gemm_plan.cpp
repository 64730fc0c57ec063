// The GEMM stride planner (src/backend/gemm_plan.h) that the CPU matmul runs and a cuBLASLt
// matmul will run: layouts read in place, merged dimensions, batch offsets and strides, and
// the layouts that must be copied.
#include "backend/gemm_plan.h"

#include <gtest/gtest.h>

#include "strata/strata.h"

namespace strata {
namespace {

void expect_layout(std::optional<gemm::Layout> l, bool trans, int64_t ld) {
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->trans, trans);
  EXPECT_EQ(l->ld, ld);
}

// batch products of [m, k] x [k, n].
void expect_sizes(const gemm::Plan& p, int64_t batch, int64_t m, int64_t n, int64_t k) {
  EXPECT_EQ(p.batch, batch);
  EXPECT_EQ(p.m, m);
  EXPECT_EQ(p.n, n);
  EXPECT_EQ(p.k, k);
}

TEST(GemmPlan, LayoutRowMajorTransposedAndPadded) {
  expect_layout(gemm::layout(3, 4, 4, 1), false, 4);    // contiguous
  expect_layout(gemm::layout(3, 4, 10, 1), false, 10);  // rows of a wider matrix
  expect_layout(gemm::layout(3, 4, 1, 3), true, 3);     // a transposed view
  expect_layout(gemm::layout(3, 4, 1, 7), true, 7);     // transposed and padded
  // One row or one column: the other stride is never used.
  expect_layout(gemm::layout(1, 4, 999, 1), false, 4);
  expect_layout(gemm::layout(3, 1, 5, 999), false, 5);
  // Empty: nothing is read.
  expect_layout(gemm::layout(0, 4, 123, 7), false, 4);
}

TEST(GemmPlan, LayoutsNoGemmCanRead) {
  EXPECT_FALSE(gemm::layout(3, 4, 8, 2).has_value());  // every other element
  EXPECT_FALSE(gemm::layout(3, 4, 2, 1).has_value());  // rows overlap
  EXPECT_FALSE(gemm::layout(3, 4, 0, 1).has_value());  // a broadcast row
}

TEST(GemmPlan, MergeDims) {
  auto m = gemm::merge_dims(std::vector<int64_t>{2, 3, 4}, std::vector<int64_t>{12, 4, 1});
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->size, 24);
  EXPECT_EQ(m->stride, 1);
  // Size-1 dimensions never step, whatever their stride.
  m = gemm::merge_dims(std::vector<int64_t>{2, 1, 3}, std::vector<int64_t>{15, 100, 5});
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->size, 6);
  EXPECT_EQ(m->stride, 5);
  m = gemm::merge_dims(std::vector<int64_t>{2, 0}, std::vector<int64_t>{7, 1});
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->size, 0);
  // Padding between rows, a broadcast dimension, a permuted pair: no single stride.
  EXPECT_FALSE(gemm::merge_dims(std::vector<int64_t>{2, 3}, std::vector<int64_t>{8, 1}).has_value());
  EXPECT_FALSE(gemm::merge_dims(std::vector<int64_t>{2, 3}, std::vector<int64_t>{0, 1}).has_value());
  EXPECT_FALSE(gemm::merge_dims(std::vector<int64_t>{2, 3}, std::vector<int64_t>{1, 2}).has_value());
}

TEST(GemmPlan, BatchOffsets) {
  EXPECT_EQ(gemm::batch_offsets(std::vector<int64_t>{2, 3}, std::vector<int64_t>{30, 5}),
            (std::vector<int64_t>{0, 5, 10, 30, 35, 40}));
  EXPECT_EQ(gemm::batch_offsets(std::vector<int64_t>{}, std::vector<int64_t>{}), (std::vector<int64_t>{0}));
}

// [B, M, K] @ [K, N] with a's rows sharing one stride: one GEMM over B*M rows.
TEST(GemmPlan, SharedRightOperandMergesRows) {
  Tensor a = randn({2, 3, 4}), b = randn({4, 5});
  gemm::Plan p = gemm::plan_matmul(a, b, Shape{2});
  expect_sizes(p, 1, 6, 5, 4);
  expect_layout(p.a.layout, false, 4);
  expect_layout(p.b.layout, false, 5);
  EXPECT_EQ(p.a.t.data_ptr(), a.data_ptr());  // read in place
  EXPECT_FALSE(p.sum_batch);
}

// Transposed matrices whose rows do not merge across the batch: a batched plan that reads
// them in place with the transpose flag, one uniform batch stride.
TEST(GemmPlan, TransposedStackIsBatchedInPlace) {
  Tensor x = randn({2, 4, 3});
  Tensor a = x.transpose(-1, -2);  // [2, 3, 4], strides [12, 1, 3]
  Tensor b = randn({4, 5});
  gemm::Plan p = gemm::plan_matmul(a, b, Shape{2});
  expect_sizes(p, 2, 3, 5, 4);
  expect_layout(p.a.layout, true, 3);
  EXPECT_EQ(p.a.t.data_ptr(), x.data_ptr());
  EXPECT_EQ(p.a.offsets, (std::vector<int64_t>{0, 12}));
  EXPECT_EQ(p.a.batch_stride, std::optional<int64_t>(12));
  EXPECT_EQ(p.b.offsets, (std::vector<int64_t>{0, 0}));  // shared
  EXPECT_EQ(p.b.batch_stride, std::optional<int64_t>(0));
}

// Batch entries picked out of a larger tensor: offsets per entry, no uniform stride.
TEST(GemmPlan, NonUniformBatchHasOffsetsOnly) {
  Tensor big = randn({3, 4, 2, 2});
  Tensor a = big.narrow(1, 0, 3);  // batch [3, 3], strides [16, 4]: 3*4 != 16
  Tensor b = randn({3, 3, 2, 2});
  gemm::Plan p = gemm::plan_matmul(a, b, Shape{3, 3});
  EXPECT_EQ(p.batch, 9);
  EXPECT_EQ(p.a.offsets, (std::vector<int64_t>{0, 4, 8, 16, 20, 24, 32, 36, 40}));
  EXPECT_FALSE(p.a.batch_stride.has_value());
  EXPECT_EQ(p.b.batch_stride, std::optional<int64_t>(4));
}

// Every other column: no GEMM reads it, so the plan holds a contiguous copy.
TEST(GemmPlan, UnreadableLayoutIsCopied) {
  Tensor x = randn({3, 4, 2});
  Tensor a = x.select(2, 0);  // [3, 4], strides [8, 2]
  Tensor b = randn({4, 5});
  gemm::Plan p = gemm::plan_matmul(a, b, Shape{});
  expect_sizes(p, 1, 3, 5, 4);
  expect_layout(p.a.layout, false, 4);
  EXPECT_NE(p.a.t.data_ptr(), x.data_ptr());
  EXPECT_TRUE(p.a.t.is_contiguous());
}

// The weight gradient of a linear layer, dW = dY^T X over [B, T, ...]: the batch folds
// into the contraction, one GEMM with k = B*T.
TEST(GemmPlan, SumOverBatchFoldsIntoContraction) {
  Tensor g = randn({2, 3, 5}), x = randn({2, 3, 4});
  gemm::Plan p = gemm::plan_matmul_sum(g.transpose(-1, -2), x);
  EXPECT_FALSE(p.sum_batch);
  expect_sizes(p, 1, 5, 4, 6);
  expect_layout(p.a.layout, true, 5);
  expect_layout(p.b.layout, false, 4);
}

TEST(GemmPlan, SumOverBatchWithoutFoldAccumulates) {
  Tensor a = randn({2, 3, 4}), b = randn({2, 4, 5});  // a's (batch, K) do not merge
  gemm::Plan p = gemm::plan_matmul_sum(a, b);
  EXPECT_TRUE(p.sum_batch);
  EXPECT_EQ(p.batch, 2);
  EXPECT_EQ(p.a.offsets, (std::vector<int64_t>{0, 12}));
  EXPECT_EQ(p.b.offsets, (std::vector<int64_t>{0, 20}));
}

TEST(GemmPlan, RowMajorInPlace) {
  EXPECT_TRUE(gemm::row_major_in_place(randn({2, 3, 4, 5})));
  // q of a fused [B, T, 3, H, D] projection, as attention reads it.
  Tensor qkv = randn({2, 4, 3, 2, 8});
  Tensor q = qkv.select(2, 0).transpose(1, 2);  // [B, H, T, D]
  EXPECT_TRUE(gemm::row_major_in_place(q));
  EXPECT_TRUE(gemm::row_major_in_place(randn({1, 1, 3, 5}).expand({2, 4, 3, 5})));  // batch stride 0
  EXPECT_FALSE(gemm::row_major_in_place(randn({2, 3, 5, 4}).transpose(-1, -2)));
}

}  // namespace
}  // namespace strata
