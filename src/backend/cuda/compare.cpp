// CUDA glue of the comparisons and selections (kernels/cuda/compare.cu): tensors to
// pointers, the strided index of the inputs (broadcast strides), one launch on the current
// stream. masked_fill's value is converted here, by the CPU's rule (detail::scalar_as).
#include <cstdint>
#include <cstring>

#include "backend/cuda/broadcast_index.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/compare.h"
#include "strata_kernels/elementwise.h"
#include "tensor/dtype_dispatch.h"

namespace strata::cuda_ops {
namespace {

// The dtypes the CPU's comparisons and selections take (detail::dispatch_arith_or_bool).
int32_t select_element_type(DType dtype, const char* name) {
  switch (dtype) {
    case DType::Float32: return STRATA_ELEMENT_F32;
    case DType::Float64: return STRATA_ELEMENT_F64;
    case DType::Int32: return STRATA_ELEMENT_I32;
    case DType::Int64: return STRATA_ELEMENT_I64;
    case DType::Bool: return STRATA_ELEMENT_BOOL;
    default: break;
  }
  STRATA_FAIL(name, ": dtype ", dtype,
              " is not supported on CUDA (float32, float64, int32, int64 or bool; "
              "convert with .to())");
}

// A fresh output on `like`'s device (checked, naming the op), made current for the scope.
struct Launch {
  Tensor out;
  cuda_detail::DeviceGuard guard;
  cudaStream_t stream;
  Launch(const Shape& shape, DType dtype, const Tensor& like, const char* name)
      : out((cuda_detail::check_device(like.device(), name), empty(shape, {.dtype = dtype, .device = like.device()}))),
        guard(like.device().index),
        stream(cuda_detail::stream_of(like.device().index)) {}
};

}  // namespace

Tensor compare(backend::CompareOp op, const Tensor& a, const Tensor& b, const char* name) {
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  const int32_t type = select_element_type(a.dtype(), name);
  Launch l(shape, DType::Bool, a, name);
  const Tensor* inputs[2] = {&a, &b};
  const auto index = cuda_detail::broadcast_index<2>(shape, inputs, name);
  STRATA_LAUNCH(strata_compare(static_cast<int32_t>(op), type, l.out.data_ptr(), a.data_ptr(), b.data_ptr(), &index,
                               shape.numel(), l.stream));
  return l.out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, const Shape& shape, const char* name) {
  const int32_t type = select_element_type(a.dtype(), name);
  Launch l(shape, a.dtype(), a, name);
  const Tensor* inputs[3] = {&cond, &a, &b};
  const auto index = cuda_detail::broadcast_index<3>(shape, inputs, name);
  STRATA_LAUNCH(strata_where(type, l.out.data_ptr(), cond.data_ptr(), a.data_ptr(), b.data_ptr(), &index, shape.numel(),
                             l.stream));
  return l.out;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value, const Shape& shape, const char* name) {
  const int32_t type = select_element_type(x.dtype(), name);
  // The value's bits in x's dtype, as the CPU converts it (integers saturate).
  uint64_t bits = 0;
  detail::dispatch_arith_or_bool(x.dtype(), name, [&]<class T>() {
    const T v = detail::scalar_as<T>(value);
    std::memcpy(&bits, &v, sizeof v);
  });
  Launch l(shape, x.dtype(), x, name);
  const Tensor* inputs[2] = {&x, &mask};
  const auto index = cuda_detail::broadcast_index<2>(shape, inputs, name);
  STRATA_LAUNCH(strata_masked_fill(type, l.out.data_ptr(), x.data_ptr(), mask.data_ptr(), &bits, &index, shape.numel(),
                                   l.stream));
  return l.out;
}

}  // namespace strata::cuda_ops
