// Tensor::index and Tensor::index_put_ (strata/tensor/tensor_index.h): results against
// hand-computed values (x[i, j, k] = 20 i + 5 j + k), gradients by finite differences,
// version bumps and refusals. PyTorch's own results: tests/reference/test_tensor_index_reference.cpp.
#include <gtest/gtest.h>

#include "gradcheck.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using namespace strata::indexing;
using strata::testing::expect_error_mentions;
using strata::testing::expect_gradients_match;
using strata::testing::leaf64;

namespace {

Tensor grid() { return arange(0, 60, 1, {.dtype = DType::Float64}).view({3, 4, 5}); }
double at(int64_t i, int64_t j, int64_t k) { return static_cast<double>(20 * i + 5 * j + k); }
std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }
Tensor longs(std::vector<int64_t> v, Shape shape) { return from_vector(v, shape); }
Tensor mask(std::vector<int32_t> v, Shape shape) { return from_vector(v, shape).to(DType::Bool); }

}  // namespace

TEST(TensorIndex, BasicIndicesAreViews) {
  Tensor x = grid();
  Tensor row = x.index({1});
  EXPECT_EQ(row.shape(), Shape({4, 5}));
  EXPECT_EQ(row.storage(), x.storage());
  EXPECT_EQ(vals(row)[0], at(1, 0, 0));
  Tensor a = x.index({Slice(0, 2), 2});
  EXPECT_EQ(a.shape(), Shape({2, 5}));
  EXPECT_EQ(vals(a), (std::vector<double>{10, 11, 12, 13, 14, 30, 31, 32, 33, 34}));
  Tensor b = x.index({Slice(None, None, 2), Slice(1, None), -1});
  EXPECT_EQ(b.shape(), Shape({2, 3}));
  EXPECT_EQ(vals(b),
            (std::vector<double>{at(0, 1, 4), at(0, 2, 4), at(0, 3, 4), at(2, 1, 4), at(2, 2, 4), at(2, 3, 4)}));
  EXPECT_EQ(vals(x.index({Slice(-2), 0, 0})), (std::vector<double>{at(1, 0, 0), at(2, 0, 0)}));
  EXPECT_EQ(vals(x.index({Slice(-100, 100), 0, 0})), (std::vector<double>{0, 20, 40}));  // clamped
  EXPECT_EQ(x.index({Slice(3, 1)}).shape(), Shape({0, 4, 5}));
  EXPECT_EQ(vals(x.index({1, Slice(0, 4, 3), Slice(1, 5, 2)})), (std::vector<double>{21, 23, 36, 38}));
  Tensor e = x.index({Ellipsis, 0});
  EXPECT_EQ(e.shape(), Shape({3, 4}));
  EXPECT_EQ(vals(e)[5], at(1, 1, 0));
  EXPECT_EQ(x.index({None, 0, Ellipsis, None}).shape(), Shape({1, 4, 5, 1}));
  EXPECT_EQ(x.index({Ellipsis}).shape(), Shape({3, 4, 5}));
  EXPECT_EQ(x.index({0, 1, 2}).shape(), Shape({}));
  EXPECT_EQ(x.index({-1, -1, -1}).item(), 59.0);
}

TEST(TensorIndex, AdvancedIndicesFollowTorchRules) {
  Tensor x = grid();
  Tensor r = x.index({longs({2, 0, -1}, {3})});
  EXPECT_EQ(r.shape(), Shape({3, 4, 5}));
  EXPECT_EQ(vals(r.index({Slice(), 0, 0})), (std::vector<double>{40, 0, 40}));
  // One index of two dimensions on dim 1: its dimensions replace dim 1.
  Tensor idx = longs({0, 3, 1, 1}, {2, 2});
  Tensor s = x.index({Slice(), idx});
  ASSERT_EQ(s.shape(), Shape({3, 2, 2, 5}));
  EXPECT_EQ(vals(s.index({2, 0, 1, 4})), (std::vector<double>{at(2, 3, 4)}));
  EXPECT_EQ(vals(s.index({1, 1, 0, 2})), (std::vector<double>{at(1, 1, 2)}));
  // Adjacent advanced indices broadcast together and stay in place.
  Tensor adj = x.index({Slice(), longs({0, 3}, {2}), longs({4, 1}, {2})});
  ASSERT_EQ(adj.shape(), Shape({3, 2}));
  EXPECT_EQ(vals(adj),
            (std::vector<double>{at(0, 0, 4), at(0, 3, 1), at(1, 0, 4), at(1, 3, 1), at(2, 0, 4), at(2, 3, 1)}));
  // Separated by a slice: the broadcast dimensions come first.
  Tensor sep = x.index({longs({2, 0}, {2}), Slice(), longs({4}, {1})});
  ASSERT_EQ(sep.shape(), Shape({2, 4}));
  EXPECT_EQ(vals(sep.index({0})), (std::vector<double>{at(2, 0, 4), at(2, 1, 4), at(2, 2, 4), at(2, 3, 4)}));
  EXPECT_EQ(vals(sep.index({1})), (std::vector<double>{at(0, 0, 4), at(0, 1, 4), at(0, 2, 4), at(0, 3, 4)}));
  // int32 index, and None before an advanced index.
  Tensor i32 = from_vector(std::vector<int32_t>{1}, {1});
  EXPECT_EQ(x.index({None, i32}).shape(), Shape({1, 1, 4, 5}));
}

TEST(TensorIndex, BoolMasks) {
  Tensor x = grid();
  Tensor rows = x.index({mask({1, 0, 1}, {3})});
  ASSERT_EQ(rows.shape(), Shape({2, 4, 5}));
  EXPECT_EQ(vals(rows.index({Slice(), 0, 0})), (std::vector<double>{0, 40}));
  Tensor m = mask({1, 0, 0, 0, 1, /**/ 0, 0, 0, 0, 0, /**/ 0, 1, 0, 0, 0, /**/ 0, 0, 0, 0, 1}, {4, 5});
  Tensor picked = x.index({2, m});
  EXPECT_EQ(vals(picked), (std::vector<double>{at(2, 0, 0), at(2, 0, 4), at(2, 2, 1), at(2, 3, 4)}));
  Tensor all = x.index({Ellipsis, mask({0, 1, 1, 0, 0}, {5})});
  EXPECT_EQ(all.shape(), Shape({3, 4, 2}));
  EXPECT_EQ(x.index({x > 55.0}).shape(), Shape({4}));
  EXPECT_EQ(vals(x.index({x > 55.0})), (std::vector<double>{56, 57, 58, 59}));
}

TEST(TensorIndex, IndexGradients) {
  auto f = [](std::vector<TensorIndex> ix) { return [ix](const std::vector<Tensor>& in) { return in[0].index(ix); }; };
  expect_gradients_match(f({Slice(None, None, 2), Slice(1, None), -1}), {leaf64({3, 4, 5}, 1)});
  expect_gradients_match(f({None, 1, Ellipsis, Slice(-3, None, 2)}), {leaf64({3, 4, 5}, 2)});
  expect_gradients_match(f({Slice(), longs({0, 3, 3, 1}, {2, 2})}), {leaf64({3, 4, 5}, 3)});  // repeats add up
  expect_gradients_match(f({longs({2, 0}, {2}), Slice(), longs({4, 4}, {2})}), {leaf64({3, 4, 5}, 4)});
  expect_gradients_match(f({Slice(), longs({1, 2}, {2}), longs({0, 0}, {2})}), {leaf64({3, 4, 5}, 5)});
  expect_gradients_match(f({1, mask({1, 0, 1, 1, 0, 0, 0, 1, 0, 0, 1, 1, 0, 1, 0, 0, 0, 0, 1, 1}, {4, 5})}),
                         {leaf64({3, 4, 5}, 6)});
}

TEST(TensorIndex, IndexPutWritesInPlace) {
  Tensor z = zeros({3, 4}, {.dtype = DType::Float64});
  const void* data = z.data_ptr();
  uint64_t v = z.version();
  z.index_put_({1}, 7.0);
  EXPECT_EQ(z.version(), ++v);
  z.index_put_({Slice(), Slice(1, None, 2)}, from_vector(std::vector<double>{1, 2}, {2}));  // broadcast rows
  EXPECT_EQ(z.version(), ++v);
  EXPECT_EQ(z.data_ptr(), data);
  EXPECT_EQ(vals(z), (std::vector<double>{0, 1, 0, 2, 7, 1, 7, 2, 0, 1, 0, 2}));
  z.index_put_({z > 1.5}, -1.0);
  EXPECT_EQ(z.version(), ++v);
  EXPECT_EQ(vals(z), (std::vector<double>{0, 1, 0, -1, -1, 1, -1, -1, 0, 1, 0, -1}));
  // Advanced rows; a repeated row takes the last write (as PyTorch on the CPU).
  Tensor src = from_vector(std::vector<double>{1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}, {3, 4});
  z.index_put_({longs({2, 0, 2}, {3})}, src);
  EXPECT_EQ(z.version(), ++v);
  EXPECT_EQ(vals(z), (std::vector<double>{2, 2, 2, 2, -1, 1, -1, -1, 3, 3, 3, 3}));
  z.index_put_({longs({0, 1}, {2}), longs({3, 0}, {2})}, from_vector(std::vector<double>{8, 9}, {2}));
  EXPECT_EQ(z.version(), ++v);
  EXPECT_EQ(vals(z.index({Slice(0, 2)})), (std::vector<double>{2, 2, 2, 8, 9, 1, -1, -1}));
  Tensor i = zeros({2, 3}, {.dtype = DType::Int64});  // any dtype on the CPU
  i.index_put_({Slice(), longs({2}, {1})}, 5.0);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 5, 0, 0, 5}));
}

TEST(TensorIndex, IndexPutGradients) {
  auto put = [](std::vector<TensorIndex> ix) {
    return [ix](const std::vector<Tensor>& in) {
      Tensor base = mul(in[0], 1.0);  // a non-leaf: index_put_ records on it
      base.index_put_(ix, in[1]);
      return base;
    };
  };
  expect_gradients_match(put({Slice(), Slice(1, None, 2)}), {leaf64({3, 4}, 1), leaf64({2}, 2)});
  expect_gradients_match(put({longs({2, 0}, {2})}), {leaf64({3, 4}, 3), leaf64({2, 4}, 4)});
  expect_gradients_match(put({Slice(), longs({3, 0, 1}, {3})}), {leaf64({3, 4}, 5), leaf64({3, 1}, 6)});
  expect_gradients_match(put({mask({1, 0, 0, 1, 0, 1, 1, 0, 0, 0, 0, 1}, {3, 4})}),
                         {leaf64({3, 4}, 7), leaf64({1}, 8)});
  // A buffer that needs no grad takes the value's history.
  expect_gradients_match(
      [](const std::vector<Tensor>& in) {
        Tensor buf = zeros({4, 3}, {.dtype = DType::Float64});
        buf.index_put_({longs({3, 1}, {2})}, in[0]);
        return buf;
      },
      {leaf64({2, 3}, 9)});
}

TEST(TensorIndex, Refusals) {
  Tensor x = grid();
  expect_error_mentions([&] { x.index({5}); }, {"index 5 is out of range for dimension 0 with size 3", "[3, 4, 5]"});
  expect_error_mentions([&] { x.index({Slice(), -5}); }, {"index -5 is out of range for dimension 1 with size 4"});
  expect_error_mentions(
      [&] {
        x.index({Ellipsis, longs({0, 5}, {2})});
      },
      {"index 5 is out of range for dimension 2 with size 5"});
  expect_error_mentions([&] { x.index({0, 0, 0, 0}); }, {"too many indices", "dimension 3", "[3, 4, 5]", "names 4"});
  expect_error_mentions(
      [&] {
        x.index({Slice(), mask({1, 0}, {2})});
      },
      {"Bool mask of shape [2]", "dimension 1", "mask size 2", "tensor size 4"});
  expect_error_mentions([&] { x.index({Ellipsis, 0, Ellipsis}); }, {"one Ellipsis"});
  expect_error_mentions([&] { x.index({x}); }, {"int64, int32 or bool", "float64"});
  expect_error_mentions([&] { x.index({Slice(0, 3, 0)}); }, {"step 0", "positive"});
  expect_error_mentions([&] { x.index_put_({0}, zeros({3}, {.dtype = DType::Float64})); },
                        {"index_put_", "[3]", "cannot be broadcast", "[4, 5]"});
  expect_error_mentions([&] { x.index_put_({0}, zeros({5})); }, {"index_put_", "float32", "float64"});
  Tensor p = leaf64({3}, 1);
  expect_error_mentions([&] { p.index_put_({0}, 1.0); }, {"index_put_", "leaf tensor that requires grad"});
  Tensor h = mul(p, 2.0);
  Tensor view = h.index({Slice(0, 2)});
  expect_error_mentions([&] { h.index_put_({0}, 1.0); }, {"index_put_", "shares"});
}
