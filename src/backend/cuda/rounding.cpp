// CUDA glue of round/floor/ceil/trunc/sign and isnan/isinf/isfinite (kernels/cuda/rounding.cu):
// tensors to pointers, the input's strided index, one launch on the current stream.
#include "strata_kernels/rounding.h"
#include "backend/cuda/broadcast_index.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/elementwise.h"

namespace strata::cuda_ops {
namespace {

// The kernels' element code; bool only where `bool_allowed` (the class tests).
int32_t element_type(const Tensor& a, bool bool_allowed, const char* name) {
  switch (a.dtype()) {
    case DType::Float32: return STRATA_ELEMENT_F32;
    case DType::Float64: return STRATA_ELEMENT_F64;
    case DType::Int32: return STRATA_ELEMENT_I32;
    case DType::Int64: return STRATA_ELEMENT_I64;
    case DType::Bool:
      if (bool_allowed) return STRATA_ELEMENT_BOOL;
      break;
    default: break;
  }
  STRATA_FAIL(name, ": dtype ", a.dtype(), " (shape ", a.shape(), ") is not supported on CUDA (float32, float64, int32",
              bool_allowed ? ", int64 or bool" : " or int64", "; convert with .to())");
}

// One launch of `launch(out, index, stream)` over a's elements into a fresh output of `dtype`.
template <class Launch>
Tensor run(const Tensor& a, DType dtype, const char* name, Launch&& launch) {
  cuda_detail::check_device(a.device(), name);
  Tensor out = empty(a.shape(), {.dtype = dtype, .device = a.device()});
  const Tensor* inputs[1] = {&a};
  const auto index = cuda_detail::broadcast_index<1>(a.shape(), inputs, name);
  cuda_detail::DeviceGuard guard(a.device().index);
  STRATA_LAUNCH(launch(out.data_ptr(), &index, cuda_detail::stream_of(a.device().index)));
  return out;
}

}  // namespace

Tensor rounding(backend::RoundingOp op, const Tensor& a, const char* name) {
  const int32_t type = element_type(a, false, name);
  return run(a, a.dtype(), name, [&](void* out, const void* index, cudaStream_t s) {
    return strata_rounding(static_cast<int32_t>(op), type, out, a.data_ptr(), index, a.numel(), s);
  });
}

Tensor classify(backend::ClassifyOp op, const Tensor& a, const char* name) {
  const int32_t type = element_type(a, true, name);
  return run(a, DType::Bool, name, [&](void* out, const void* index, cudaStream_t s) {
    return strata_classify(static_cast<int32_t>(op), type, out, a.data_ptr(), index, a.numel(), s);
  });
}

}  // namespace strata::cuda_ops
