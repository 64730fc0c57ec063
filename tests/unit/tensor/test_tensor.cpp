#include <gtest/gtest.h>

#include "strata/strata.h"
#include "tensor/allocator_buckets.h"

using namespace strata;

TEST(Tensor, FactoriesAndMetadata) {
  Tensor z = zeros({2, 3});
  EXPECT_EQ(z.shape(), Shape({2, 3}));
  EXPECT_EQ(z.strides(), (Strides{3, 1}));
  EXPECT_EQ(z.dtype(), DType::Float32);
  EXPECT_TRUE(z.is_contiguous());
  EXPECT_EQ(z.numel(), 6);
  EXPECT_EQ(ones({4}, {.dtype = DType::Int32}).to_vector<int32_t>(), (std::vector<int32_t>{1, 1, 1, 1}));
  EXPECT_EQ(full({2}, 2.5, {.dtype = DType::Float64}).to_vector<double>(), (std::vector<double>{2.5, 2.5}));
  EXPECT_EQ(arange(0, 5).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(5, 0, -2).to_vector<int64_t>(), (std::vector<int64_t>{5, 3, 1}));
  EXPECT_EQ(scalar_tensor(3.0).item(), 3.0);
  EXPECT_THROW(zeros({2, -1}), Error);
}

TEST(Tensor, FromBlobSharesAndFromVectorCopies) {
  std::vector<float> buf = {1, 2, 3, 4, 5, 6};
  Tensor t = from_blob(buf.data(), {2, 3}, DType::Float32);
  buf[0] = 10;
  EXPECT_EQ(t.to_vector<float>()[0], 10.0f);
  Tensor c = from_vector(buf, {3, 2});
  buf[1] = 20;
  EXPECT_EQ(c.to_vector<float>()[1], 2.0f);
  bool freed = false;
  {
    float* owned = new float[4];
    Tensor o = from_blob(owned, {4}, DType::Float32, [&](void* p) {
      delete[] static_cast<float*>(p);
      freed = true;
    });
  }
  EXPECT_TRUE(freed);
  EXPECT_THROW(from_vector(std::vector<float>{1, 2, 3}, {2, 2}), Error);
}

TEST(Tensor, Views) {
  Tensor x = arange(0, 24, 1, {.dtype = DType::Float32}).view({2, 3, 4});
  Tensor t = x.transpose(0, 2);
  EXPECT_EQ(t.shape(), Shape({4, 3, 2}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.contiguous().to_vector<float>()[1], 12.0f);  // t[0][0][1] = x[1][0][0]
  EXPECT_THROW(t.view({24}), Error);                       // needs contiguous
  EXPECT_EQ(t.reshape({24}).to_vector<float>()[1], 12.0f);
  Tensor n = x.narrow(1, 1, 2);
  EXPECT_EQ(n.shape(), Shape({2, 2, 4}));
  EXPECT_EQ(n.to_vector<float>()[0], 4.0f);
  EXPECT_THROW(x.narrow(1, 2, 2), Error);
  Tensor p = x.permute({2, 0, 1});
  EXPECT_EQ(p.shape(), Shape({4, 2, 3}));
  EXPECT_EQ(p.contiguous().to_vector<float>()[1], 4.0f);  // p[0][0][1] = x[0][1][0]
  EXPECT_THROW(x.permute({0, 0, 1}), Error);
  EXPECT_EQ(x.view({-1, 4}).shape(), Shape({6, 4}));
  EXPECT_THROW(x.view({5, -1}), Error);
  EXPECT_EQ(x.unsqueeze(0).shape(), Shape({1, 2, 3, 4}));
  EXPECT_EQ(x.unsqueeze(-1).shape(), Shape({2, 3, 4, 1}));
  EXPECT_EQ(x.unsqueeze(1).squeeze(1).shape(), x.shape());
  EXPECT_EQ(x.select(1, 2).shape(), Shape({2, 4}));
  EXPECT_EQ(x.select(1, 2).to_vector<float>()[0], 8.0f);
  EXPECT_EQ(x.flatten(1).shape(), Shape({2, 12}));
  Tensor e = ones({3, 1}).expand({2, 3, 4});
  EXPECT_EQ(e.shape(), Shape({2, 3, 4}));
  EXPECT_EQ(e.strides(), (Strides{0, 1, 0}));
  EXPECT_THROW(ones({3, 2}).expand({3, 4}), Error);
  EXPECT_THROW(x.transpose(0, 3), Error);
}

TEST(Tensor, DTypeConversion) {
  Tensor x = from_vector(std::vector<float>{1.5f, -2.25f, 65504.0f, 1e-8f}, {4});
  EXPECT_EQ(x.to(DType::Float16).to(DType::Float32).to_vector<float>(),
            (std::vector<float>{1.5f, -2.25f, 65504.0f, 0.0f}));
  EXPECT_EQ(x.to(DType::Int64).to_vector<int64_t>(), (std::vector<int64_t>{1, -2, 65504, 0}));
  EXPECT_EQ(x.to(DType::BFloat16).to(DType::Float64).to_vector<double>()[0], 1.5);
  Tensor c = x.clone();
  {
    NoGradGuard g;
    c.fill_(0);
  }
  EXPECT_EQ(x.to_vector<float>()[0], 1.5f);
  EXPECT_THROW(x.data<double>(), Error);
}

TEST(Tensor, CopyAndFillStrided) {
  Tensor x = zeros({3, 4});
  x.transpose(0, 1).narrow(0, 1, 2).fill_(7);  // columns 1 and 2
  std::vector<float> v = x.to_vector<float>();
  EXPECT_EQ(v[0], 0.0f);
  EXPECT_EQ(v[1], 7.0f);
  EXPECT_EQ(v[2], 7.0f);
  EXPECT_EQ(v[3], 0.0f);
  Tensor y = zeros({4, 3});
  y.copy_(x.transpose(0, 1));
  EXPECT_EQ(y.to_vector<float>()[3], 7.0f);
  EXPECT_THROW(y.copy_(x), Error);
}

TEST(Tensor, PrintsReadably) {
  Tensor x = arange(0, 6, 1, {.dtype = DType::Float32}).view({2, 3});
  std::string s = x.to_string();
  EXPECT_NE(s.find("[[0, 1, 2],"), std::string::npos) << s;
  EXPECT_NE(s.find("shape=[2, 3]"), std::string::npos) << s;
  EXPECT_NE(s.find("dtype=float32"), std::string::npos) << s;
  std::string big = zeros({2000}).to_string();  // over the default threshold of 1000 elements
  EXPECT_NE(big.find("..."), std::string::npos);
  EXPECT_LT(big.size(), 200u);
}

TEST(Allocator, ReusesFreedBlocks) {
  { Tensor warm = empty({1000}); }
  AllocatorStats before = cpu_allocator::stats();
  for (int i = 0; i < 10; ++i) {
    Tensor t = empty({1000});
  }
  AllocatorStats after = cpu_allocator::stats();
  EXPECT_EQ(after.system_allocs, before.system_allocs);
  EXPECT_EQ(after.requests, before.requests + 10);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(empty({7}).raw_data()) % 64, 0u);
  EXPECT_EQ(detail::allocator_block_size(1), 512u);
  EXPECT_GE(detail::allocator_block_size((1 << 20) + 1), (1u << 20) + 1);
}

TEST(Errors, CarryFileAndLine) {
  try {
    zeros({2}).view({3});
    FAIL();
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("view"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[2]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("views.cpp:"), std::string::npos) << msg;
  }
}
