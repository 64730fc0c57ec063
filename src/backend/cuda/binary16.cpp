// CUDA glue of the 16-bit add / mul (kernels/cuda/binary16.cu, the functor the CPU runs):
// tensors to pointers, one launch on the current stream.
#include "strata_kernels/binary16.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/float_element_type.h"
#include "strata/tensor/factory.h"

namespace strata::cuda_ops {

Tensor binary16(backend::BinaryOp op, const Tensor& a, const Tensor& b, DType out_dtype, const char* name) {
  cuda_detail::OpScope l(a, name);
  Tensor out = empty(a.shape(), {.dtype = out_dtype, .device = a.device()});
  STRATA_LAUNCH(strata_binary16(static_cast<int32_t>(op), cuda_detail::storage_element_type(a.dtype(), name),
                                cuda_detail::storage_element_type(b.dtype(), name),
                                cuda_detail::storage_element_type(out_dtype, name), a.data_ptr(), b.data_ptr(),
                                out.data_ptr(), a.numel(), l.stream));
  return out;
}

}  // namespace strata::cuda_ops
