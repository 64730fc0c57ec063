// CUDA glue of the elementwise ops: tensors to pointers, the strided index of the inputs
// (broadcast strides), one kernel launch on the current stream.
#include <string>

#include "backend/cuda/broadcast_index.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/elementwise.h"

namespace strata::cuda_ops {
namespace {

int32_t element_type(DType dtype, bool integers_allowed, const char* name) {
  switch (dtype) {
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
  STRATA_FAIL(name, ": dtype ", dtype, " is not supported on CUDA (",
              integers_allowed ? "float32, float64, int32 or int64" : "float32 or float64", "; convert with .to())");
}

struct Launch {
  Tensor out;
  cudaStream_t stream;
};

Launch prepare(const Shape& shape, const Tensor& like, const char* name) {
  const int device = like.device().index;
  cuda_detail::check_device(like.device(), name);
  return {empty(shape, {.dtype = like.dtype(), .device = like.device()}), cuda_detail::stream_of(device)};
}

}  // namespace

Tensor binary(backend::BinaryOp op, const Tensor& a, const Tensor& b, const char* name) {
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  const int32_t type = element_type(a.dtype(), strata_kernels::is_arithmetic(op), name);
  Launch l = prepare(shape, a, name);
  const Tensor* inputs[2] = {&a, &b};
  const auto index = cuda_detail::broadcast_index<2>(shape, inputs, name);
  cuda_detail::DeviceGuard guard(a.device().index);
  STRATA_LAUNCH(strata_binary(static_cast<int32_t>(op), type, l.out.data_ptr(), a.data_ptr(), b.data_ptr(), &index,
                              shape.numel(), l.stream));
  return l.out;
}

Tensor unary(backend::UnaryOp op, const Tensor& a, const char* name, double p, double q) {
  const int32_t type = element_type(a.dtype(), strata_kernels::is_arithmetic(op), name);
  Launch l = prepare(a.shape(), a, name);
  const Tensor* inputs[1] = {&a};
  const auto index = cuda_detail::broadcast_index<1>(a.shape(), inputs, name);
  cuda_detail::DeviceGuard guard(a.device().index);
  STRATA_LAUNCH(
      strata_unary(static_cast<int32_t>(op), type, l.out.data_ptr(), a.data_ptr(), &index, a.numel(), p, q, l.stream));
  return l.out;
}

Tensor unary_grad(backend::UnaryGradOp op, const Tensor& grad, const Tensor& saved, const char* name, double p,
                  double q) {
  const int32_t type = element_type(saved.dtype(), false, name);
  Launch l = prepare(saved.shape(), saved, name);
  const Tensor* inputs[2] = {&grad, &saved};
  const auto index = cuda_detail::broadcast_index<2>(saved.shape(), inputs, name);
  cuda_detail::DeviceGuard guard(saved.device().index);
  STRATA_LAUNCH(strata_unary_grad(static_cast<int32_t>(op), type, l.out.data_ptr(), grad.data_ptr(), saved.data_ptr(),
                                  &index, saved.numel(), p, q, l.stream));
  return l.out;
}

Tensor binary_grad(backend::BinaryGradOp op, const Tensor& grad, const Tensor& a, const Tensor& b, const char* name) {
  const int32_t type = element_type(grad.dtype(), false, name);
  Launch l = prepare(grad.shape(), grad, name);
  const Tensor* inputs[3] = {&grad, &a, &b};
  const auto index = cuda_detail::broadcast_index<3>(grad.shape(), inputs, name);
  cuda_detail::DeviceGuard guard(grad.device().index);
  STRATA_LAUNCH(strata_binary_grad(static_cast<int32_t>(op), type, l.out.data_ptr(), grad.data_ptr(), a.data_ptr(),
                                   b.data_ptr(), &index, grad.numel(), l.stream));
  return l.out;
}

void add_inplace(const Tensor& self, const Tensor& other, double alpha) {
  STRATA_CHECK(self.dtype() == other.dtype(), "add_: dtype mismatch, ", self.dtype(), " and ", other.dtype());
  STRATA_CHECK(broadcast_shapes(self.shape(), other.shape(), "add_") == self.shape(), "add_: cannot broadcast ",
               other.shape(), " into ", self.shape());
  // alpha == 1 skips the product: x * 1 is exact, so the bits are the same either way.
  const Tensor scaled = alpha == 1.0 ? other : unary(backend::UnaryOp::MulScalar, other, "add_", alpha);
  cuda_detail::copy(self, binary(backend::BinaryOp::Add, self, scaled, "add_"));
}

void mul_inplace(const Tensor& self, double value) {
  cuda_detail::copy(self, unary(backend::UnaryOp::MulScalar, self, "mul_", value));
}

}  // namespace strata::cuda_ops
