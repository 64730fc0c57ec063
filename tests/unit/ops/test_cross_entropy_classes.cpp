// cross_entropy with a class limit (the first `classes` columns of the logits are classes,
// the rest a padded vocabulary): finite differences in float64, and against slicing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gradcheck.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using strata::testing::error_of;
using strata::testing::expect_contains;
using strata::testing::expect_gradients_match;
using strata::testing::leaf64;
using strata::testing::same_bits;
using V = const std::vector<Tensor>&;

TEST(CrossEntropyClasses, Gradcheck) {
  // Padding columns do not change the loss: their finite difference, like their gradient, is 0.
  const Tensor t = from_vector<int64_t>({2, -100, 0, 3, 3, 1}, {6});
  expect_gradients_match([](V in) { return cross_entropy(in[0], in[1], -100, 4); }, {leaf64({6, 7}, 21), t});
  // A loss scaled downstream, int32 targets, a custom ignore_index, one padding column.
  const Tensor t32 = from_vector<int32_t>({1, 4, 0}, {3});
  expect_gradients_match([](V in) { return mul(cross_entropy(in[0], in[1], 0, 5), 2.5); }, {leaf64({3, 6}, 22), t32});
}

TEST(CrossEntropyClasses, EqualsSlicingBitForBitAndPaddingGetsZeroGradient) {
  // The limited loss reads the same values in the same order as the sliced one: equal bits.
  // Huge padding logits would dominate a softmax over every column.
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Generator gen(23);
    const int64_t rows = 9, classes = 11, cols = 16;
    Tensor x = randn({rows, cols}, {.dtype = dtype}, &gen);
    x.narrow(1, classes, cols - classes).fill_(1e4);
    const Tensor t = from_vector<int64_t>({0, 10, 3, -100, 7, 7, 1, 10, 5}, {rows});
    Tensor padded = x.clone().set_requires_grad(true);
    Tensor sliced = x.narrow(1, 0, classes).contiguous().set_requires_grad(true);
    Tensor lp = cross_entropy(padded, t, -100, classes);
    Tensor ls = cross_entropy(sliced, t);
    const std::string what = std::string(dtype_name(dtype));
    EXPECT_TRUE(same_bits(lp, ls)) << what << ": " << lp.item() << " vs " << ls.item();
    mul(lp, 0.75).backward();
    mul(ls, 0.75).backward();
    EXPECT_TRUE(same_bits(padded.grad().narrow(1, 0, classes), sliced.grad())) << what;
    for (double g : padded.grad().narrow(1, classes, cols - classes).contiguous().to_vector<double>())
      EXPECT_EQ(g, 0.0) << what;
  }
}

TEST(CrossEntropyClasses, DefaultIsEveryColumn) {
  const Tensor x = leaf64({4, 5}, 24);
  const Tensor t = from_vector<int64_t>({4, 0, 2, 4}, {4});
  EXPECT_EQ(cross_entropy(x, t).item(), cross_entropy(x, t, -100, 5).item());
}

TEST(CrossEntropyClasses, BadClassesAndTargetsAreNamed) {
  const Tensor x = leaf64({3, 6}, 25);
  const Tensor t = from_vector<int64_t>({1, 2, 3}, {3});
  expect_contains(error_of([&] { (void)cross_entropy(x, t, -100, 7); }), "classes 7 must be in [1, 6]");
  expect_contains(error_of([&] { (void)cross_entropy(x, t, -100, 0); }), "classes 0 must be in [1, 6]");
  // A target in the padding columns is no class.
  expect_contains(error_of([&] { (void)cross_entropy(x, t, -100, 3); }),
                  "target 3 at position 2 is out of range for logits with 3 classes");
}
