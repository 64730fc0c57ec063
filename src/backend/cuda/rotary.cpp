// CUDA glue of the rotary position embedding: contiguous x and tables (the op made them
// so), one launch on the current stream.
#include "strata_kernels/rotary.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/float_element_type.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/elementwise.h"

namespace strata::cuda_ops {

Tensor rotary_apply(const Tensor& x, const Tensor& cos, const Tensor& sin, bool transpose) {
  cuda_detail::check_device(x.device(), "rotary_embedding");
  Tensor y = empty(x.shape(), {.dtype = x.dtype(), .device = x.device()});
  if (x.numel() == 0) return y;
  const int64_t t = x.size(-2), d = x.size(-1);
  cuda_detail::DeviceGuard guard(x.device().index);
  STRATA_LAUNCH(strata_rotary_apply(cuda_detail::storage_element_type(x.dtype(), "rotary_embedding"), transpose ? 1 : 0,
                                    y.data_ptr(), x.data_ptr(), cos.data_ptr(), sin.data_ptr(), x.numel() / d, t, d,
                                    cuda_detail::stream_of(x.device().index)));
  return y;
}

}  // namespace strata::cuda_ops
