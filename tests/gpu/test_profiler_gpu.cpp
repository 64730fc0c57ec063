// profiler::Session on CUDA: proves the event seam times device work (device ms > 0), the
// launch counter sees the cuBLASLt GEMM and kernel C API calls, and the allocator counts
// device bytes, for a forward matmul and its backward node.
#include <map>
#include <string>

#include "gpu/gpu_test.h"

namespace strata::testing {
namespace {

using ProfilerGpu = GpuTest;

TEST_F(ProfilerGpu, MatmulHasDeviceTimeLaunchesAndBytes) {
  Tensor a = randn({512, 512}).to(gpu).set_requires_grad(true);
  Tensor b = randn({512, 512}).to(gpu);
  cuda::synchronize();
  profiler::Session session;
  Tensor c = matmul(a, b);
  c.sum().backward();
  std::map<std::string, profiler::Row> rows;
  for (const auto& r : session.rows()) rows[r.name] = r;
  ASSERT_TRUE(rows.count("matmul") && rows.count("MatmulBackward")) << session.table();
  const profiler::Row& mm = rows.at("matmul");
  EXPECT_EQ(mm.calls, 2);  // forward, and dA = dC B^T in the backward (b needs no gradient)
  EXPECT_TRUE(mm.has_device_time);
  EXPECT_GT(mm.device_ms, 0);
  EXPECT_GE(mm.launches, 2);                         // one cuBLASLt GEMM per call at least
  EXPECT_GE(mm.bytes_allocated, 2 * 512 * 512 * 4);  // each call's [512, 512] float output
  const profiler::Row& back = rows.at("MatmulBackward");
  EXPECT_TRUE(back.has_device_time);
  EXPECT_GT(back.device_ms, 0);
  EXPECT_GE(back.launches, 1);
  EXPECT_NE(session.table().find("matmul"), std::string::npos);
}

}  // namespace
}  // namespace strata::testing
