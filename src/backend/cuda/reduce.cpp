// CUDA glue of the sum over dimensions: the same [outer, n, inner] plan as the CPU sum
// (cpu::plan_dim_reduce), one kernel launch on the current stream.
#include "strata_kernels/reduce.h"
#include "backend/cpu/reduce.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/elementwise.h"

namespace strata::cuda_ops {

Tensor sum_keepdim(const Tensor& x, const std::vector<bool>& reduced) {
  int32_t type = 0;
  switch (x.dtype()) {
    case DType::Float32: type = STRATA_ELEMENT_F32; break;
    case DType::Float64: type = STRATA_ELEMENT_F64; break;
    case DType::Int32: type = STRATA_ELEMENT_I32; break;
    case DType::Int64: type = STRATA_ELEMENT_I64; break;
    default:
      STRATA_FAIL("sum: dtype ", x.dtype(), " (shape ", x.shape(), ", ", x.device(),
                  ") is not supported on CUDA (float32, float64, int32 or int64; convert with .to())");
  }
  cuda_detail::check_device(x.device(), "sum");
  Tensor out = empty(cpu::sum_keepdim_shape(x.shape(), reduced), {.dtype = x.dtype(), .device = x.device()});
  if (out.numel() == 0) return out;
  // A split set of reduced dimensions, or a strided x, costs a device copy first.
  const cpu::DimReducePlan p = cpu::plan_dim_reduce(x.detach(), reduced);
  cuda_detail::DeviceGuard guard(x.device().index);
  STRATA_LAUNCH(strata_dim_sum(type, out.data_ptr(), p.src.data_ptr(), p.outer, p.n, p.inner,
                               cuda_detail::stream_of(x.device().index)));
  return out;
}

}  // namespace strata::cuda_ops
