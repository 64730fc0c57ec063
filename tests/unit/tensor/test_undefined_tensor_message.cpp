// An op handed an undefined (default-constructed) tensor says which op and where, not only
// "operation on an undefined tensor".
#include <gtest/gtest.h>

#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using strata::testing::error_of;
using strata::testing::expect_contains;

namespace {

TEST(UndefinedTensorMessage, NamesTheOpThatWasHandedIt) {
  const Tensor none;
  const std::string s = error_of([&] { (void)sum(none); });
  expect_contains(s, "operation on an undefined tensor: ");
  expect_contains(s, "shape() in sum (reduce.cpp:");
  expect_contains(error_of([&] { (void)none.reshape({2}); }), "is_contiguous() in reshape (views.cpp:");
}

TEST(UndefinedTensorMessage, NamesTheAccessorAndTheCallerFileAndLine) {
  const Tensor none;
  const int line = __LINE__ + 1;
  const std::string msg = error_of([&] { (void)none.shape(); });
  expect_contains(msg, "shape() in ");
  expect_contains(msg, "test_undefined_tensor_message.cpp:" + std::to_string(line));
  expect_contains(error_of([&] { (void)none.detach(); }), "detach()");
}

}  // namespace
