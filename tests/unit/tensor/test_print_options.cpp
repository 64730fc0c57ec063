// set_print_options (strata/tensor/print_options.h): the text operator<< prints.
#include <gtest/gtest.h>

#include <sstream>

#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using strata::testing::expect_error_mentions;

namespace {

// Restores the defaults after each test, since the options are process-wide.
class PrintOptionsTest : public ::testing::Test {
 protected:
  void TearDown() override { set_print_options({}); }
};

std::string printed(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

}  // namespace

TEST_F(PrintOptionsTest, DefaultsAreTorchs) {
  const PrintOptions d = print_options();
  EXPECT_EQ(d.precision, 4);
  EXPECT_EQ(d.threshold, 1000);
  EXPECT_EQ(d.edgeitems, 3);
  EXPECT_EQ(d.linewidth, 80);
  Tensor x = arange(0, 8, 1, {.dtype = DType::Float32});
  EXPECT_EQ(printed(x), "Tensor([0, 1, 2, 3, 4, 5, 6, 7], shape=[8], dtype=float32)");
}

TEST_F(PrintOptionsTest, ThresholdAndEdgeItemsSummarize) {
  Tensor x = arange(0, 8, 1, {.dtype = DType::Int64});
  set_print_options({.threshold = 6});
  EXPECT_EQ(printed(x), "Tensor([0, 1, 2, ..., 5, 6, 7], shape=[8], dtype=int64)");
  set_print_options({.threshold = 6, .edgeitems = 1});
  EXPECT_EQ(printed(x), "Tensor([0, ..., 7], shape=[8], dtype=int64)");
  set_print_options({.threshold = 3, .edgeitems = 1});
  EXPECT_EQ(printed(x.view({2, 4})), "Tensor([[0, ..., 3],\n        [4, ..., 7]], shape=[2, 4], dtype=int64)");
  EXPECT_EQ(printed(x.view({4, 2})), "Tensor([[0, 1],\n        ...,\n        [6, 7]], shape=[4, 2], dtype=int64)");
}

TEST_F(PrintOptionsTest, PrecisionIsSignificantDigits) {
  Tensor x = from_vector(std::vector<double>{3.14159265, 2.0 / 3.0}, {2});
  EXPECT_EQ(printed(x), "Tensor([3.142, 0.6667], shape=[2], dtype=float64)");
  set_print_options({.precision = 8});
  EXPECT_EQ(printed(x), "Tensor([3.1415927, 0.66666667], shape=[2], dtype=float64)");
  EXPECT_EQ(printed(scalar_tensor(1.0 / 3.0, {.dtype = DType::Float64})),
            "Tensor(0.33333333, shape=[], dtype=float64)");
}

TEST_F(PrintOptionsTest, LinewidthWrapsRows) {
  Tensor x = arange(10, 22, 1, {.dtype = DType::Int64});
  set_print_options({.linewidth = 30});
  // "Tensor([" puts the first value at column 8; each row holds what fits in 30 columns.
  EXPECT_EQ(printed(x),
            "Tensor([10, 11, 12, 13, 14,\n"
            "        15, 16, 17, 18, 19,\n"
            "        20, 21], shape=[12], dtype=int64)");
}

TEST_F(PrintOptionsTest, RefusesBadOptions) {
  expect_error_mentions([] { set_print_options({.precision = 0}); }, {"precision", "0"});
  expect_error_mentions([] { set_print_options({.threshold = -1}); }, {"threshold"});
  expect_error_mentions([] { set_print_options({.edgeitems = 0}); }, {"edgeitems"});
  expect_error_mentions([] { set_print_options({.linewidth = 0}); }, {"linewidth"});
  EXPECT_EQ(print_options().precision, 4);  // unchanged after a refusal
}
