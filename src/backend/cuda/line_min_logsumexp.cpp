// CUDA glue of min/argmin and logsumexp (kernels/cuda/line_min_logsumexp.cu): the CPU's
// [outer, n, inner] layouts (cpu::layout_of for min, the sum's cpu::plan_dim_reduce for
// logsumexp), one launch on the current stream.
#include "strata_kernels/line_min_logsumexp.h"
#include "backend/cpu/dim_layout.h"
#include "backend/cpu/reduce.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/elementwise.h"

namespace strata::cuda_ops {
namespace {

int32_t element_type(const Tensor& x, bool integers_allowed, const char* op) {
  switch (x.dtype()) {
    case DType::Float32: return STRATA_ELEMENT_F32;
    case DType::Float64: return STRATA_ELEMENT_F64;
    case DType::Int32:
      if (integers_allowed) return STRATA_ELEMENT_I32;
      break;
    case DType::Int64:
      if (integers_allowed) return STRATA_ELEMENT_I64;
      break;
    default: break;
  }
  STRATA_FAIL(op, ": dtype ", x.dtype(), " (shape ", x.shape(), ", ", x.device(), ") is not supported on CUDA (",
              integers_allowed ? "float32, float64, int32 or int64" : "float32 or float64", "; convert with .to())");
}

}  // namespace

void min_keepdim(const Tensor& x_in, int64_t dim, Tensor* values, Tensor* indices) {
  const int32_t type = element_type(x_in, true, "min");
  cuda_detail::check_device(x_in.device(), "min");
  const Tensor x = x_in.detach().contiguous();
  Shape out_shape = x.shape();
  out_shape[static_cast<size_t>(dim)] = 1;
  *values = empty(out_shape, {.dtype = x.dtype(), .device = x.device()});
  *indices = empty(out_shape, {.dtype = DType::Int64, .device = x.device()});
  const cpu::Layout l = cpu::layout_of(x.shape(), dim);
  cuda_detail::DeviceGuard guard(x.device().index);
  STRATA_LAUNCH(strata_line_min(type, values->data_ptr(), static_cast<int64_t*>(indices->data_ptr()), x.data_ptr(),
                                l.outer, l.n, l.inner, cuda_detail::stream_of(x.device().index)));
}

Tensor logsumexp_keepdim(const Tensor& x, const std::vector<bool>& reduced) {
  const int32_t type = element_type(x, false, "logsumexp");
  cuda_detail::check_device(x.device(), "logsumexp");
  Tensor out = empty(cpu::sum_keepdim_shape(x.shape(), reduced), {.dtype = x.dtype(), .device = x.device()});
  if (out.numel() == 0) return out;
  // A split set of reduced dimensions, or a strided x, costs a device copy first.
  const cpu::DimReducePlan p = cpu::plan_dim_reduce(x.detach(), reduced);
  cuda_detail::DeviceGuard guard(x.device().index);
  STRATA_LAUNCH(strata_line_logsumexp(type, out.data_ptr(), p.src.data_ptr(), p.outer, p.n, p.inner,
                                      cuda_detail::stream_of(x.device().index)));
  return out;
}

}  // namespace strata::cuda_ops
