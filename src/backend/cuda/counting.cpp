// CUDA glue of nonzero (two phases around a host read of the count: the result's size
// depends on the data) and bincount (atomic adds into zeros).
#include "strata_kernels/counting.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/elementwise.h"

namespace strata::cuda_ops {
namespace {

int32_t nonzero_type(const Tensor& x) {
  switch (x.dtype()) {
    case DType::Float32: return STRATA_ELEMENT_F32;
    case DType::Float64: return STRATA_ELEMENT_F64;
    case DType::Int32: return STRATA_ELEMENT_I32;
    case DType::Int64: return STRATA_ELEMENT_I64;
    case DType::Bool: return STRATA_ELEMENT_BOOL;
    default: break;
  }
  STRATA_FAIL("nonzero: dtype ", x.dtype(), " (shape ", x.shape(), ", ", x.device(),
              ") is not supported on CUDA (float32, float64, int32, int64 or bool; convert with .to())");
}

}  // namespace

Tensor nonzero(const Tensor& x_in) {
  const int32_t type = nonzero_type(x_in);
  cuda_detail::check_device(x_in.device(), "nonzero");
  STRATA_CHECK(x_in.dim() <= STRATA_NONZERO_MAX_DIMS, "nonzero: input of shape ", x_in.shape(), " has ", x_in.dim(),
               " dimensions; CUDA takes at most ", STRATA_NONZERO_MAX_DIMS);
  const Tensor x = x_in.contiguous();
  const int64_t n = x.numel();
  if (n == 0) return empty({0, x.dim()}, {.dtype = DType::Int64, .device = x.device()});
  const size_t ws_bytes = strata_nonzero_workspace(n);
  STRATA_CHECK(ws_bytes > 0, "nonzero: the workspace size query failed for ", n, " elements");
  const Tensor ws = empty({static_cast<int64_t>((ws_bytes + 7) / 8)}, {.dtype = DType::Int64, .device = x.device()});
  const Tensor count = empty({1}, {.dtype = DType::Int64, .device = x.device()});
  cuda_detail::DeviceGuard guard(x.device().index);
  cudaStream_t stream = cuda_detail::stream_of(x.device().index);
  STRATA_LAUNCH(strata_nonzero_count(type, x.data_ptr(), n, static_cast<int64_t*>(count.data_ptr()), ws.data_ptr(),
                                     ws_bytes, stream));
  // The host synchronisation: the output's row count is the number of nonzero elements.
  const int64_t rows = count.to(Device::cpu()).to_vector<int64_t>()[0];
  Tensor out = empty({rows, x.dim()}, {.dtype = DType::Int64, .device = x.device()});
  StrataNonzeroShape shape{};
  for (int64_t d = 0; d < x.dim(); ++d) shape.sizes[d] = x.size(d);
  STRATA_LAUNCH(strata_nonzero_coords(type, static_cast<int64_t*>(out.data_ptr()), x.data_ptr(), n, shape,
                                      static_cast<int32_t>(x.dim()), ws.data_ptr(), ws_bytes, stream));
  return out;
}

Tensor bincount(const Tensor& x, const Tensor& weights, int64_t length) {
  cuda_detail::check_device(x.device(), "bincount");
  const DType dtype = weights.defined() ? weights.dtype() : DType::Int64;
  Tensor out = zeros({length}, {.dtype = dtype, .device = x.device()});
  const Tensor w = weights.defined() ? weights.contiguous() : weights;
  const int32_t weight_type = !w.defined() ? -1 : dtype == DType::Float32 ? STRATA_ELEMENT_F32 : STRATA_ELEMENT_F64;
  cuda_detail::DeviceGuard guard(x.device().index);
  STRATA_LAUNCH(strata_bincount(weight_type, out.data_ptr(), static_cast<const int64_t*>(x.data_ptr()),
                                w.defined() ? w.data_ptr() : nullptr, x.numel(),
                                cuda_detail::stream_of(x.device().index)));
  return out;
}

}  // namespace strata::cuda_ops
