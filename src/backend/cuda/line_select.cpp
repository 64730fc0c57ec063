// CUDA glue of max/argmax, topk, cumsum and the gradient of max and topk: the CPU's
// [outer, n, inner] layout around one dimension of a contiguous copy, one launch of
// cuda/line_select.cu (a thread per line running the CPU's common/line_select.h) on the
// current stream.
#include "strata_kernels/line_select.h"
#include "backend/cpu/dim_layout.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/float_element_type.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/elementwise.h"

namespace strata::cuda_ops {
using cuda_detail::arith_element_type;

void max_keepdim(const Tensor& x_in, int64_t dim, Tensor* values, Tensor* indices) {
  const int32_t type = arith_element_type(x_in, "max");
  cuda_detail::check_device(x_in.device(), "max");
  Tensor x = x_in.detach().contiguous();
  Shape out_shape = x.shape();
  out_shape[static_cast<size_t>(dim)] = 1;
  *values = empty(out_shape, {.dtype = x.dtype(), .device = x.device()});
  *indices = empty(out_shape, {.dtype = DType::Int64, .device = x.device()});
  const cpu::Layout l = cpu::layout_of(x.shape(), dim);
  cuda_detail::DeviceGuard guard(x.device().index);
  STRATA_LAUNCH(strata_line_max(type, values->data_ptr(), static_cast<int64_t*>(indices->data_ptr()), x.data_ptr(),
                                l.outer, l.n, l.inner, cuda_detail::stream_of(x.device().index)));
}

void topk(const Tensor& x_in, int64_t k, int64_t dim, bool largest, Tensor* values, Tensor* indices) {
  const int32_t type = arith_element_type(x_in, "topk");
  cuda_detail::check_device(x_in.device(), "topk");
  Tensor x = x_in.detach().contiguous();
  Shape out_shape = x.shape();
  out_shape[static_cast<size_t>(dim)] = k;
  *values = empty(out_shape, {.dtype = x.dtype(), .device = x.device()});
  *indices = empty(out_shape, {.dtype = DType::Int64, .device = x.device()});
  const cpu::Layout l = cpu::layout_of(x.shape(), dim);
  cuda_detail::DeviceGuard guard(x.device().index);
  STRATA_LAUNCH(strata_line_topk(type, values->data_ptr(), static_cast<int64_t*>(indices->data_ptr()), x.data_ptr(),
                                 l.outer, l.n, l.inner, k, largest ? 1 : 0, cuda_detail::stream_of(x.device().index)));
}

Tensor cumsum(const Tensor& x_in, int64_t dim, bool reverse) {
  const char* op = reverse ? "cumsum backward" : "cumsum";
  const int32_t type = arith_element_type(x_in, op);
  cuda_detail::check_device(x_in.device(), op);
  Tensor x = x_in.detach().contiguous();
  Tensor out = empty(x.shape(), {.dtype = x.dtype(), .device = x.device()});
  const cpu::Layout l = cpu::layout_of(x.shape(), dim);
  cuda_detail::DeviceGuard guard(x.device().index);
  STRATA_LAUNCH(strata_line_cumsum(type, out.data_ptr(), x.data_ptr(), l.outer, l.n, l.inner, reverse ? 1 : 0,
                                   cuda_detail::stream_of(x.device().index)));
  return out;
}

Tensor scatter_add_lines(const char* op, const Shape& shape, int64_t dim, const Tensor& index, const Tensor& grad) {
  const int32_t type = arith_element_type(grad, op);
  cuda_detail::check_device(grad.device(), op);
  STRATA_CHECK(index.device() == grad.device(), op, ": index on ", index.device(), " and gradient on ", grad.device(),
               " differ");
  Shape want = shape;
  want[static_cast<size_t>(dim)] = index.size(dim);
  STRATA_CHECK(index.shape() == want && grad.shape() == want, op, ": on CUDA the index (shape ", index.shape(),
               ") and gradient (shape ", grad.shape(), ") must match the input's shape ", shape,
               " except along dimension ", dim);
  Tensor idx = index.contiguous();
  Tensor g = grad.detach().contiguous();
  Tensor out = zeros(shape, {.dtype = grad.dtype(), .device = grad.device()});
  const cpu::Layout l = cpu::layout_of(shape, dim);
  cuda_detail::DeviceGuard guard(grad.device().index);
  STRATA_LAUNCH(strata_line_scatter_add(type, out.data_ptr(), static_cast<const int64_t*>(idx.data_ptr()), g.data_ptr(),
                                        l.outer, l.n, l.inner, index.size(dim),
                                        cuda_detail::stream_of(g.device().index)));
  return out;
}

}  // namespace strata::cuda_ops
