// CUDA tensors on a real GPU (label gpu): storage, copies between devices, dtype conversion,
// fill, the caching allocator. Skips where no GPU is visible.
#include <gtest/gtest.h>

#include "gpu/gpu_test.h"
#include "tensor/allocator_buckets.h"
#include "test_util.h"

namespace strata {
namespace {

using testing::expect_error_mentions;

const std::vector<DType> kDtypes{DType::Float32, DType::Float64, DType::BFloat16,
                                 DType::Float16, DType::Int32,   DType::Int64};

using CudaTensor = testing::GpuTest;

TEST_F(CudaTensor, RoundTripEveryDtype) {
  const std::vector<double> v{1.5, -2, 3, 0, 7, 100};
  for (DType d : kDtypes) {
    Tensor host = from_vector(v, {2, 3}).to(d);
    Tensor dev = host.to(gpu);
    EXPECT_EQ(dev.device(), gpu);
    EXPECT_EQ(dev.dtype(), d);
    EXPECT_EQ(dev.shape(), host.shape());
    Tensor back = dev.to(Device::cpu());
    EXPECT_TRUE(back.device().is_cpu());
    EXPECT_EQ(back.to_vector<double>(), host.to_vector<double>()) << d;
    EXPECT_EQ(dev.to_vector<double>(), host.to_vector<double>()) << d;  // to_vector moves to the host itself
  }
}

TEST_F(CudaTensor, StridedViewsAndConversions) {
  Tensor x = arange(0, 12, 1, {.dtype = DType::Float32}).view({3, 4});
  Tensor xt = x.transpose(0, 1);
  EXPECT_EQ(xt.to(gpu).to_vector<float>(), xt.contiguous().to_vector<float>());  // strided host source
  Tensor d = x.to(gpu);
  Tensor dt = d.transpose(0, 1);  // strided device source
  EXPECT_FALSE(dt.is_contiguous());
  EXPECT_EQ(dt.to(Device::cpu()).to_vector<float>(), xt.contiguous().to_vector<float>());
  EXPECT_EQ(dt.contiguous().to_vector<float>(), xt.contiguous().to_vector<float>());
  EXPECT_EQ(d.narrow(1, 1, 2).to_vector<float>(), x.narrow(1, 1, 2).contiguous().to_vector<float>());
  // float32 <-> bfloat16/float16 on the device round exactly as on the CPU.
  Tensor r = randn({1000}, {.dtype = DType::Float32});
  for (DType h : {DType::BFloat16, DType::Float16}) {
    Tensor on_gpu = r.to(gpu).to(h);
    EXPECT_EQ(on_gpu.device(), gpu);
    EXPECT_EQ(on_gpu.to(DType::Float32).to_vector<float>(), r.to(h).to(DType::Float32).to_vector<float>()) << h;
  }
  // Other conversions (staged through the host).
  EXPECT_EQ(d.to(DType::Float64).to_vector<double>(), x.to(DType::Float64).to_vector<double>());
  EXPECT_EQ(d.to(DType::Int32).to_vector<int32_t>(), x.to(DType::Int32).to_vector<int32_t>());
}

// Views on one device copy with one strided kernel (kernels/cuda/strided_copy.cu), for
// every element size: a permuted source made contiguous, a broadcast source, and a write
// into a strided view that must leave the elements between its rows untouched.
TEST_F(CudaTensor, StridedDeviceCopiesWriteOnlyTheView) {
  for (DType d : kDtypes) {
    const Tensor host = arange(0, 2 * 3 * 5, 1, {.dtype = DType::Float64}).view({2, 3, 5}).to(d);
    const Tensor dev = host.to(gpu);
    const Tensor permuted = dev.permute({2, 0, 1});
    EXPECT_EQ(permuted.contiguous().to_vector<double>(), host.permute({2, 0, 1}).contiguous().to_vector<double>()) << d;
    Tensor target = full({5, 8}, 7, {.dtype = d, .device = gpu});
    Tensor window = target.narrow(1, 2, 3);  // [5, 3], row stride 8
    window.copy_(dev.select(0, 1).transpose(0, 1));
    std::vector<double> want(40, 7.0);
    const std::vector<double> src = host.select(0, 1).transpose(0, 1).contiguous().to_vector<double>();
    for (int r = 0; r < 5; ++r)
      for (int c = 0; c < 3; ++c) want[static_cast<size_t>(r * 8 + 2 + c)] = src[static_cast<size_t>(r * 3 + c)];
    EXPECT_EQ(target.to_vector<double>(), want) << d;
    const Tensor row = dev.select(0, 0).select(0, 2);  // [5]
    EXPECT_EQ(row.expand({4, 5}).contiguous().to_vector<double>(),
              host.select(0, 0).select(0, 2).expand({4, 5}).contiguous().to_vector<double>())
        << d;
  }
}

TEST_F(CudaTensor, FillZerosFull) {
  for (DType d : kDtypes) {
    EXPECT_EQ(zeros({5}, {.dtype = d, .device = gpu}).to_vector<double>(), std::vector<double>(5, 0.0)) << d;
    EXPECT_EQ(ones({5}, {.dtype = d, .device = gpu}).to_vector<double>(), std::vector<double>(5, 1.0)) << d;
    EXPECT_EQ(full({3}, -3, {.dtype = d, .device = gpu}).to_vector<double>(), std::vector<double>(3, -3.0)) << d;
  }
  // fill_ on a strided view leaves the other elements alone.
  Tensor m = zeros({3, 4}, {.device = gpu});
  m.narrow(1, 2, 1).fill_(5.0);
  std::vector<float> expect(12, 0.0f);
  for (int r = 0; r < 3; ++r) expect[static_cast<size_t>(r * 4 + 2)] = 5.0f;
  EXPECT_EQ(m.to_vector<float>(), expect);
  m.zero_();
  EXPECT_EQ(m.to_vector<float>(), std::vector<float>(12, 0.0f));
}

TEST_F(CudaTensor, CopyBetweenDevices) {
  Tensor src = from_vector<float>({1, 2, 3, 4}, {4});
  Tensor dev = zeros({4}, {.dtype = DType::Float64, .device = gpu});
  dev.copy_(src);  // host -> device with conversion
  EXPECT_EQ(dev.to_vector<double>(), (std::vector<double>{1, 2, 3, 4}));
  Tensor dev2 = empty({4}, {.dtype = DType::Float64, .device = gpu});
  dev2.copy_(dev);  // device -> device
  Tensor host = zeros({4}, {.dtype = DType::Int64});
  host.copy_(dev2);  // device -> host with conversion
  EXPECT_EQ(host.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(scalar_tensor(2.5, {.device = gpu}).item(), 2.5);
}

TEST_F(CudaTensor, CachingAllocatorReusesBlocks) {
  cuda::synchronize();
  cuda_allocator::empty_cache();
  AllocatorStats s0 = cuda_allocator::stats(0);
  { Tensor a = empty({1000}, {.device = gpu}); }
  AllocatorStats s1 = cuda_allocator::stats(0);
  EXPECT_EQ(s1.requests, s0.requests + 1);
  EXPECT_EQ(s1.system_allocs, s0.system_allocs + 1);
  EXPECT_EQ(s1.in_use_bytes, s0.in_use_bytes);
  EXPECT_EQ(s1.cached_bytes, s0.cached_bytes + detail::allocator_block_size(4000));
  { Tensor b = empty({1000}, {.device = gpu}); }  // served from the cache
  AllocatorStats s2 = cuda_allocator::stats(0);
  EXPECT_EQ(s2.requests, s1.requests + 1);
  EXPECT_EQ(s2.system_allocs, s1.system_allocs);
  EXPECT_GE(s2.peak_in_use_bytes, detail::allocator_block_size(4000));
  cuda_allocator::empty_cache();
  EXPECT_EQ(cuda_allocator::stats(0).cached_bytes, 0u);
}

// ZeRO-3's release/reallocate of a storage on the GPU: the block goes back to the CUDA
// cache (not to the CPU allocator, which would free a device pointer) and returns from it.
TEST_F(CudaTensor, ReleasedCudaStorageReturnsToTheCudaCache) {
  cuda::synchronize();
  cuda_allocator::empty_cache();
  Tensor t = full({1000}, 3.0, {.device = gpu});
  const AllocatorStats before = cuda_allocator::stats(0);
  t.storage()->release();
  EXPECT_TRUE(t.storage()->released());
  EXPECT_EQ(cuda_allocator::stats(0).in_use_bytes, before.in_use_bytes - detail::allocator_block_size(4000));
  EXPECT_EQ(cuda_allocator::stats(0).cached_bytes, before.cached_bytes + detail::allocator_block_size(4000));
  t.storage()->reallocate();
  EXPECT_EQ(cuda_allocator::stats(0).in_use_bytes, before.in_use_bytes);
  t.copy_(full({1000}, 5.0));
  EXPECT_EQ(t.to_vector<float>(), std::vector<float>(1000, 5.0f));
}

// reset_peak of a device that never allocated makes no cache entry, so a later
// empty_cache does not switch to (or fail on) that device; an impossible request names the
// requested and free bytes after the cache was released and the allocation retried.
TEST_F(CudaTensor, EmptyCacheAfterResetPeakAndOutOfMemoryMessage) {
  cuda_allocator::reset_peak(cuda::device_count() + 3);
  EXPECT_NO_THROW(cuda_allocator::empty_cache());
  { Tensor cached = empty({1 << 20}, {.device = gpu}); }
  EXPECT_GT(cuda_allocator::stats(0).cached_bytes, 0u);
  const int64_t huge = int64_t{1} << 42;  // 16 TiB of float32
  expect_error_mentions([&] { (void)empty({huge}, {.device = gpu}); },
                        {"out of memory on cuda:0", "requested " + std::to_string(4 * huge) + " bytes", "bytes free of",
                         "after releasing strata's cache"});
  EXPECT_EQ(cuda_allocator::stats(0).cached_bytes, 0u);  // the cache was given back before the retry
}

TEST_F(CudaTensor, ErrorsNameOpAndDevice) {
  Tensor a = ones({4}, {.device = gpu});
  // scatter_add has no CUDA kernel (src/ops/indexing.cpp runs the CPU's only); sum, which this
  // test used before, has one now.
  const Tensor index = zeros({4}, {.dtype = DType::Int64, .device = gpu});
  expect_error_mentions([&] { (void)scatter_add(a, 0, index, a); }, {"scatter_add", "cuda:0"});
  expect_error_mentions([&] { (void)a.data<float>(); }, {"cuda:0", "host memory"});
  const int n = cuda::device_count();
  expect_error_mentions([&] { (void)zeros({1}, {.device = Device::cuda(n)}); },
                        {"cuda:" + std::to_string(n), "does not exist"});
}

TEST_F(CudaTensor, GeneratorsMatchTheCpu) {
  Generator g1(7), g2(7);
  EXPECT_EQ(randn({64}, {.device = gpu}, &g1).to_vector<float>(), randn({64}, {}, &g2).to_vector<float>());
  EXPECT_EQ(arange(0, 5, 1, {.dtype = DType::Int64, .device = gpu}).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

TEST_F(CudaTensor, ToDeviceIsDifferentiable) {
  Tensor x = ones({3}, {.requires_grad = true});
  Tensor y = x.to(gpu).to(Device::cpu());
  sum(mul(y, 2.0)).backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_TRUE(x.grad().device().is_cpu());
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{2, 2, 2}));
}

// Ops without a CUDA implementation (index_select, gather: src/ops/indexing.cpp) refuse
// device tensors in their device switch, with one message naming the op and the device;
// mixing devices is refused before that, naming the op and both inputs' devices.
TEST_F(CudaTensor, OpsWithoutCudaKernelNameTheOpAndDevice) {
  Tensor a = ones({2, 3}).to(gpu);
  const std::string none = "no CUDA implementation yet (tensor on cuda:0)";
  const Tensor first = from_vector(std::vector<int64_t>{0}, {1});
  expect_error_mentions([&] { (void)index_select(a, 1, first.to(gpu)); }, {"index_select: " + none});
  const Tensor column = zeros({2, 1}, {.dtype = DType::Int64}).to(gpu);
  expect_error_mentions([&] { (void)gather(a, 1, column); }, {"gather: " + none});
  expect_error_mentions([&] { (void)index_select(a, 1, first); },
                        {"index_select: inputs are on different devices", "input of shape [2, 3] on cuda:0",
                         "index of shape [1] on cpu"});
  expect_error_mentions([&] { (void)add(ones({2, 3}), a); }, {"add: inputs are on different devices", "cpu", "cuda:0"});
}

}  // namespace
}  // namespace strata
