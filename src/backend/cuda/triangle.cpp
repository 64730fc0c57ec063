// CUDA glue of tril/triu and one_hot (kernels/cuda/triangle.cu): a contiguous input, one
// launch on the current stream.
#include "strata_kernels/triangle.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "strata/tensor/factory.h"

namespace strata::cuda_ops {

Tensor triangle(const Tensor& x_in, int64_t diagonal, bool lower) {
  const char* op = lower ? "tril" : "triu";
  cuda_detail::check_device(x_in.device(), op);
  const Tensor x = x_in.detach().contiguous();
  Tensor out = empty(x.shape(), {.dtype = x.dtype(), .device = x.device()});
  if (x.numel() == 0) return out;
  const int64_t rows = x.size(-2), cols = x.size(-1);
  cuda_detail::DeviceGuard guard(x.device().index);
  STRATA_LAUNCH(strata_triangle(static_cast<int32_t>(dtype_size(x.dtype())), out.data_ptr(), x.data_ptr(),
                                x.numel() / (rows * cols), rows, cols, diagonal, lower ? 1 : 0,
                                cuda_detail::stream_of(x.device().index)));
  return out;
}

Tensor one_hot(const Tensor& indices_in, int64_t classes) {
  cuda_detail::check_device(indices_in.device(), "one_hot");
  const Tensor indices = indices_in.contiguous();
  Shape out_shape = indices.shape();
  out_shape.push_back(classes);
  Tensor out = empty(out_shape, {.dtype = DType::Int64, .device = indices.device()});
  if (out.numel() == 0) return out;
  cuda_detail::DeviceGuard guard(indices.device().index);
  STRATA_LAUNCH(strata_one_hot(static_cast<int64_t*>(out.data_ptr()), static_cast<const int64_t*>(indices.data_ptr()),
                               indices.numel(), classes, cuda_detail::stream_of(indices.device().index)));
  return out;
}

}  // namespace strata::cuda_ops
