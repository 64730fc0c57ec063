// CUDA glue of the 16-bit activations (kernels/cuda/unary16.cu, the functors the CPU runs):
// tensors to pointers, one launch on the current stream.
#include "strata_kernels/unary16.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/float_element_type.h"
#include "strata/tensor/factory.h"

namespace strata::cuda_ops {

Tensor unary16(backend::UnaryOp op, const Tensor& x, const char* name) {
  cuda_detail::OpScope l(x, name);
  Tensor out = empty(x.shape(), {.dtype = x.dtype(), .device = x.device()});
  STRATA_LAUNCH(strata_unary16(static_cast<int32_t>(op), cuda_detail::storage_element_type(x.dtype(), name),
                               x.data_ptr(), out.data_ptr(), x.numel(), 0, 0, l.stream));
  return out;
}

Tensor unary_grad16(backend::UnaryGradOp op, const Tensor& grad, const Tensor& saved, const char* name) {
  cuda_detail::OpScope l(saved, name);
  Tensor dx = empty(saved.shape(), {.dtype = saved.dtype(), .device = saved.device()});
  STRATA_LAUNCH(strata_unary_grad16(static_cast<int32_t>(op), cuda_detail::storage_element_type(saved.dtype(), name),
                                    grad.data_ptr(), saved.data_ptr(), dx.data_ptr(), saved.numel(), 0, 0, l.stream));
  return dx;
}

}  // namespace strata::cuda_ops
