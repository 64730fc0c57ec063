// CUDA glue of dropout: a contiguous x (the op made it so), one launch on the current stream.
#include "strata_kernels/dropout.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/float_element_type.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/elementwise.h"

namespace strata::cuda_ops {

Tensor dropout_apply(const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  cuda_detail::check_device(x.device(), "dropout");
  Tensor y = empty(x.shape(), {.dtype = x.dtype(), .device = x.device()});
  cuda_detail::DeviceGuard guard(x.device().index);
  // The scale as the CPU computes it: 1 / (1 - p) in double, then rounded to the dtype.
  STRATA_LAUNCH(strata_dropout_apply(cuda_detail::storage_element_type(x.dtype(), "dropout"), y.data_ptr(),
                                     x.data_ptr(), x.numel(), static_cast<float>(p), 1.0 / (1.0 - p), seed, offset,
                                     cuda_detail::stream_of(x.device().index)));
  return y;
}

}  // namespace strata::cuda_ops
