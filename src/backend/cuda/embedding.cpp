// CUDA glue of the embedding: the gather (a device flag reports bad indices; the host then
// names the first one with the CPU's message) and the sorted, atomic-free weight gradient.
#include "strata_kernels/embedding.h"
#include "backend/cpu/embedding.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/elementwise.h"

namespace strata::cuda_ops {
namespace {

int32_t index_type(const Tensor& indices) {
  return indices.dtype() == DType::Int32 ? STRATA_ELEMENT_I32 : STRATA_ELEMENT_I64;
}

}  // namespace

Tensor embedding_forward(const Tensor& indices, const Tensor& weight) {
  cuda_detail::check_device(weight.device(), "embedding");
  const int64_t vocab = weight.size(0), dim = weight.size(1), n = indices.numel();
  Shape out_shape = indices.shape();
  out_shape.push_back(dim);
  Tensor out = empty(out_shape, {.dtype = weight.dtype(), .device = weight.device()});
  if (out.numel() == 0) return out;
  Tensor bad = zeros({1}, {.dtype = DType::Int32, .device = weight.device()});
  {
    cuda_detail::DeviceGuard guard(weight.device().index);
    STRATA_LAUNCH(strata_embedding_forward(index_type(indices), static_cast<int32_t>(dtype_size(weight.dtype())),
                                           out.data_ptr(), weight.data_ptr(), indices.data_ptr(), n, dim, vocab,
                                           static_cast<int32_t*>(bad.data_ptr()),
                                           cuda_detail::stream_of(weight.device().index)));
  }
  // Reading the flag waits for the kernel: the price of an error that names the index.
  if (bad.to(Device::cpu()).to_vector<int32_t>()[0] != 0) {
    cpu::check_embedding_indices(indices.to(Device::cpu()), weight.shape());
  }
  return out;
}

Tensor embedding_backward(const Tensor& grad, const Tensor& indices, int64_t vocab) {
  cuda_detail::check_device(grad.device(), "embedding backward");
  STRATA_CHECK(grad.dtype() == DType::Float32 || grad.dtype() == DType::Float64, "embedding backward: gradient dtype ",
               grad.dtype(), " (shape ", grad.shape(), ") is not supported on CUDA (float32 or float64)");
  const int64_t n = indices.numel();
  const int64_t dim = n == 0 ? 0 : grad.numel() / n;
  Tensor dw = zeros({vocab, dim}, {.dtype = grad.dtype(), .device = grad.device()});
  if (n == 0 || dim == 0) return dw;
  const size_t ws_bytes = strata_embedding_backward_workspace(index_type(indices), n);
  STRATA_CHECK(ws_bytes > 0, "embedding backward: the sort's workspace size query failed for ", n, " indices");
  Tensor ws = empty({static_cast<int64_t>((ws_bytes + 7) / 8)}, {.dtype = DType::Int64, .device = grad.device()});
  cuda_detail::DeviceGuard guard(grad.device().index);
  STRATA_LAUNCH(strata_embedding_backward(index_type(indices),
                                          grad.dtype() == DType::Float32 ? STRATA_ELEMENT_F32 : STRATA_ELEMENT_F64,
                                          dw.data_ptr(), grad.data_ptr(), indices.data_ptr(), n, dim, ws.data_ptr(),
                                          ws_bytes, cuda_detail::stream_of(grad.device().index)));
  return dw;
}

}  // namespace strata::cuda_ops
