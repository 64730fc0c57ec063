// Comparisons, where, masked_fill and the Bool dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "file_test_util.h"
#include "gradcheck.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using strata::testing::expect_error_mentions;

namespace {

std::vector<int32_t> ints(const Tensor& t) { return t.to_vector<int32_t>(); }

}  // namespace

TEST(OpsCompare, ComparisonsBroadcastToBool) {
  Tensor a = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = from_vector(std::vector<double>{2, 2, 7}, {3});
  Tensor r = lt(a, b);
  EXPECT_EQ(r.dtype(), DType::Bool);
  EXPECT_EQ(r.shape(), Shape({2, 3}));
  EXPECT_EQ(ints(r), (std::vector<int32_t>{1, 0, 1, 0, 0, 1}));
  EXPECT_EQ(ints(le(a, b)), (std::vector<int32_t>{1, 1, 1, 0, 0, 1}));
  EXPECT_EQ(ints(gt(a, b)), (std::vector<int32_t>{0, 0, 0, 1, 1, 0}));
  EXPECT_EQ(ints(ge(a, b)), (std::vector<int32_t>{0, 1, 0, 1, 1, 0}));
  EXPECT_EQ(ints(eq(a, b)), (std::vector<int32_t>{0, 1, 0, 0, 0, 0}));
  EXPECT_EQ(ints(ne(b, a)), (std::vector<int32_t>{1, 0, 1, 1, 1, 1}));  // other order
  EXPECT_EQ(ints(gt(a, 3.0)), (std::vector<int32_t>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(ints(eq(scalar_tensor(2.0, {.dtype = DType::Float64}), b)), (std::vector<int32_t>{1, 1, 0}));
  EXPECT_EQ(ints(lt(a.transpose(0, 1), from_vector(std::vector<double>{2, 5}, {2}))),
            (std::vector<int32_t>{1, 1, 0, 0, 0, 0}));
  Tensor i = from_vector(std::vector<int64_t>{1, -2}, {2, 1});
  EXPECT_EQ(lt(i, from_vector(std::vector<int64_t>{0, 1, 2}, {3})).shape(), Shape({2, 3}));
  // NaN: only ne is true.
  Tensor n = from_vector(std::vector<float>{std::numeric_limits<float>::quiet_NaN()}, {1});
  EXPECT_EQ(ints(eq(n, n)), std::vector<int32_t>{0});
  EXPECT_EQ(ints(ne(n, n)), std::vector<int32_t>{1});
  EXPECT_EQ(ints(le(n, 0.0)), std::vector<int32_t>{0});
}

TEST(OpsCompare, ComparisonsAreNotDifferentiable) {
  Tensor x = from_vector(std::vector<double>{1, -1}, {2}).set_requires_grad(true);
  Tensor m = gt(x, 0.0);
  EXPECT_FALSE(m.requires_grad());
  EXPECT_EQ(ints(eq(m, gt(x, -2.0))), (std::vector<int32_t>{1, 0}));  // bool operands compare too
}

TEST(OpsCompare, WhereAndMaskedFillValues) {
  Tensor cond = from_vector(std::vector<float>{1, 0}, {2}, {.dtype = DType::Bool});
  Tensor a = from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  Tensor out = where(cond, a, scalar_tensor(9.0));
  EXPECT_EQ(out.shape(), Shape({2, 2}));
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{1, 9, 3, 9}));
  EXPECT_EQ(masked_fill(a, cond, -1.0).to_vector<float>(), (std::vector<float>{-1, 2, -1, 4}));
  // The mask may broadcast x too (as torch's out-of-place masked_fill).
  Tensor wide = masked_fill(scalar_tensor(5.0), cond, 0.0);
  EXPECT_EQ(wide.to_vector<float>(), (std::vector<float>{0, 5}));
  EXPECT_EQ(masked_fill(a, cond, -std::numeric_limits<double>::infinity()).to_vector<float>()[0],
            -std::numeric_limits<float>::infinity());
  // The select is bitwise: NaN and -0.0 pass through unchanged; int64 and bool select too.
  Tensor special = from_vector(std::vector<double>{std::nan(""), -0.0}, {2});
  std::vector<double> picked = where(cond, special, special).to_vector<double>();
  EXPECT_TRUE(std::isnan(picked[0]));
  EXPECT_TRUE(std::signbit(picked[1]));
  Tensor big = from_vector(std::vector<int64_t>{int64_t{1} << 60, -7}, {2});
  EXPECT_EQ(where(cond, big, zeros({2}, {.dtype = DType::Int64})).to_vector<int64_t>(),
            (std::vector<int64_t>{int64_t{1} << 60, 0}));
  EXPECT_EQ(ints(where(cond, cond, gt(ones({2}), 0.0))), (std::vector<int32_t>{1, 1}));
}

// The backward of where and masked_fill (a where, then a sum over the broadcast
// dimensions; the same code on every device) against finite differences.
TEST(OpsCompare, WhereAndMaskedFillGradientsBroadcast) {
  using V = const std::vector<Tensor>&;
  Generator gen(3);
  const Tensor cond = gt(randn({4, 1, 3}, {}, &gen), 0.0);
  strata::testing::expect_gradients_match([&](V in) { return where(cond, in[0], in[1]); },
                                          {strata::testing::leaf64({2, 1}, 1), strata::testing::leaf64({4, 2, 3}, 2)});
  strata::testing::expect_gradients_match([&](V in) { return where(cond, in[0], in[1]); },
                                          {strata::testing::leaf64({4, 2, 3}, 3), strata::testing::leaf64({}, 4)});
  strata::testing::expect_gradients_match([&](V in) { return masked_fill(in[0], cond, -1.5); },
                                          {strata::testing::leaf64({2, 1}, 5)});
}

TEST(OpsCompare, ConditionsAndMasksMustBeBool) {
  Tensor a = zeros({2});
  expect_error_mentions([&] { where(a, a, a); }, {"where", "condition", "bool", "float32"});
  expect_error_mentions([&] { masked_fill(a, a, 0.0); }, {"masked_fill", "mask", "bool", "float32"});
  expect_error_mentions([&] { where(gt(a, 0.0), a, zeros({2}, {.dtype = DType::Float64})); }, {"where", "float64"});
}

TEST(BoolDType, BasicsConversionsAndPrinting) {
  EXPECT_EQ(dtype_size(DType::Bool), 1u);
  EXPECT_EQ(dtype_name(DType::Bool), "bool");
  EXPECT_FALSE(is_floating(DType::Bool));
  EXPECT_EQ(static_cast<int>(DType::Bool), 6) << "new dtypes go at the end";
  Tensor b = from_vector(std::vector<float>{0, 2.5, -1, 0}, {4}, {.dtype = DType::Bool});
  EXPECT_EQ(ints(b), (std::vector<int32_t>{0, 1, 1, 0}));  // nonzero converts to true
  EXPECT_EQ(b.to(DType::Float32).to_vector<float>(), (std::vector<float>{0, 1, 1, 0}));
  EXPECT_EQ(b.to(DType::BFloat16).to(DType::Int64).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 1, 0}));
  EXPECT_EQ(b.view({2, 2}).transpose(0, 1).contiguous().to_vector<double>(), (std::vector<double>{0, 1, 1, 0}));
  EXPECT_EQ(full({}, 1.0, {.dtype = DType::Bool}).item(), 1.0);
  EXPECT_NE(b.to_string().find("dtype=bool"), std::string::npos) << b.to_string();
  EXPECT_THROW(b.set_requires_grad(true), Error);
}

TEST(BoolDType, HasNoArithmetic) {
  Tensor b = gt(zeros({2}), 0.0);
  expect_error_mentions([&] { add(b, b); }, {"add", "bool", "[2]"});
  expect_error_mentions([&] { neg(b); }, {"neg", "bool"});
  expect_error_mentions([&] { sigmoid(b); }, {"sigmoid", "bool"});
  expect_error_mentions([&] { sum(b); }, {"bool"});
}

TEST(BoolDType, SafetensorsRoundTripAsBOOL) {
  strata::testing::TempDir dir;
  Tensor m = from_vector(std::vector<float>{1, 0, 0, 1, 1}, {5}, {.dtype = DType::Bool});
  checkpoint::save_safetensors(dir.file("m.safetensors"), {{"mask", m}, {"x", ones({3})}});
  std::string bytes = strata::testing::read_bytes(dir.file("m.safetensors"));
  EXPECT_NE(bytes.find("\"BOOL\""), std::string::npos);
  Tensor back = checkpoint::load_safetensors(dir.file("m.safetensors")).tensors.at("mask");
  EXPECT_EQ(back.dtype(), DType::Bool);
  EXPECT_EQ(ints(back), ints(m));
  // A byte other than 0 or 1 is not a bool: refused, naming the tensor.
  const size_t last = bytes.size() - 1;  // the mask's last byte: it follows the larger float32 elements
  EXPECT_EQ(bytes[last], 1);
  bytes[last] = 7;
  strata::testing::write_bytes(dir.file("bad.safetensors"), bytes);
  expect_error_mentions([&] { checkpoint::load_safetensors(dir.file("bad.safetensors")); },
                        {"mask", "BOOL", "byte 7", "element 4"});
}
