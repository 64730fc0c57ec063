// The elementwise ops on the GPU: one grid-stride kernel (cuda/map_executor.cuh) per
// (functor, number of inputs), the functors being common/elementwise_ops.h's, which the CPU
// loops instantiate too.
#include <type_traits>

#include "cuda/map_executor.cuh"
#include "strata_kernels/common/elementwise_ops.h"
#include "strata_kernels/elementwise.h"

namespace {

using namespace strata_kernels;

// Every operand of these ops has the functor's one type T.
template <class T, int N, class F>
cudaError_t launch(F f, void* out, const void* index, int64_t n, cudaStream_t stream, const void* in0,
                   const void* in1 = nullptr, const void* in2 = nullptr) {
  return launch_map<N, T, T>(f, out, index, n, stream, in0, in1, in2);
}

template <class T>
cudaError_t unary(int32_t op, void* out, const void* in, const void* index, int64_t n, double p, double q,
                  cudaStream_t s) {
  const T tp = static_cast<T>(p), tq = static_cast<T>(q);
#define STRATA_UNARY(C) \
  case UnaryCode::C: return launch<T, 1>(UnaryFn<T, UnaryCode::C>{tp, tq}, out, index, n, s, in)
  switch (static_cast<UnaryCode>(op)) {
    STRATA_UNARY(Neg);
    STRATA_UNARY(Abs);
    STRATA_UNARY(AddScalar);
    STRATA_UNARY(MulScalar);
    STRATA_UNARY(Clamp);
    default: break;
  }
  if constexpr (std::is_floating_point<T>::value) {
    switch (static_cast<UnaryCode>(op)) {
      STRATA_UNARY(Exp);
      STRATA_UNARY(Log);
      STRATA_UNARY(Sqrt);
      STRATA_UNARY(Rsqrt);
      STRATA_UNARY(Tanh);
      STRATA_UNARY(Sigmoid);
      STRATA_UNARY(Silu);
      STRATA_UNARY(Pow);
      STRATA_UNARY(Gelu);
      STRATA_UNARY(Relu);
      default: break;
    }
  }
#undef STRATA_UNARY
  return cudaErrorInvalidValue;
}

template <class T>
cudaError_t binary(int32_t op, void* out, const void* a, const void* b, const void* index, int64_t n, cudaStream_t s) {
#define STRATA_BINARY(C) \
  case BinaryCode::C: return launch<T, 2>(BinaryFn<T, BinaryCode::C>{}, out, index, n, s, a, b)
  switch (static_cast<BinaryCode>(op)) {
    STRATA_BINARY(Add);
    STRATA_BINARY(Sub);
    STRATA_BINARY(Mul);
    STRATA_BINARY(Div);
    STRATA_BINARY(Minimum);
    STRATA_BINARY(Maximum);
    default: break;
  }
  if constexpr (std::is_floating_point<T>::value) {
    if (static_cast<BinaryCode>(op) == BinaryCode::Pow)
      return launch<T, 2>(BinaryFn<T, BinaryCode::Pow>{}, out, index, n, s, a, b);
  }
#undef STRATA_BINARY
  return cudaErrorInvalidValue;
}

template <class T>
cudaError_t unary_grad(int32_t op, void* out, const void* g, const void* saved, const void* index, int64_t n, double p,
                       double q, cudaStream_t s) {
  const T tp = static_cast<T>(p), tq = static_cast<T>(q);
#define STRATA_UNARY_GRAD(C) \
  case UnaryGradCode::C: return launch<T, 2>(UnaryGradFn<T, UnaryGradCode::C>{tp, tq}, out, index, n, s, g, saved)
  switch (static_cast<UnaryGradCode>(op)) {
    STRATA_UNARY_GRAD(Abs);
    STRATA_UNARY_GRAD(Exp);
    STRATA_UNARY_GRAD(Log);
    STRATA_UNARY_GRAD(Sqrt);
    STRATA_UNARY_GRAD(Rsqrt);
    STRATA_UNARY_GRAD(Tanh);
    STRATA_UNARY_GRAD(Sigmoid);
    STRATA_UNARY_GRAD(Silu);
    STRATA_UNARY_GRAD(Clamp);
    STRATA_UNARY_GRAD(Pow);
    STRATA_UNARY_GRAD(Gelu);
    STRATA_UNARY_GRAD(Relu);
  }
#undef STRATA_UNARY_GRAD
  return cudaErrorInvalidValue;
}

template <class T>
cudaError_t binary_grad(int32_t op, void* out, const void* g, const void* a, const void* b, const void* index,
                        int64_t n, cudaStream_t s) {
#define STRATA_BINARY_GRAD(C) \
  case BinaryGradCode::C: return launch<T, 3>(BinaryGradFn<T, BinaryGradCode::C>{}, out, index, n, s, g, a, b)
  switch (static_cast<BinaryGradCode>(op)) {
    STRATA_BINARY_GRAD(MinimumA);
    STRATA_BINARY_GRAD(MinimumB);
    STRATA_BINARY_GRAD(MaximumA);
    STRATA_BINARY_GRAD(MaximumB);
    STRATA_BINARY_GRAD(PowBase);
    STRATA_BINARY_GRAD(PowExponent);
  }
#undef STRATA_BINARY_GRAD
  return cudaErrorInvalidValue;
}

}  // namespace

extern "C" cudaError_t strata_unary(int32_t op, int32_t type, void* out, const void* in, const void* index, int64_t n,
                                    double p, double q, cudaStream_t s) {
  switch (type) {
    case STRATA_ELEMENT_F32: return unary<float>(op, out, in, index, n, p, q, s);
    case STRATA_ELEMENT_F64: return unary<double>(op, out, in, index, n, p, q, s);
    case STRATA_ELEMENT_I32: return unary<int32_t>(op, out, in, index, n, p, q, s);
    case STRATA_ELEMENT_I64: return unary<int64_t>(op, out, in, index, n, p, q, s);
    default: return cudaErrorInvalidValue;
  }
}

extern "C" cudaError_t strata_binary(int32_t op, int32_t type, void* out, const void* a, const void* b,
                                     const void* index, int64_t n, cudaStream_t s) {
  switch (type) {
    case STRATA_ELEMENT_F32: return binary<float>(op, out, a, b, index, n, s);
    case STRATA_ELEMENT_F64: return binary<double>(op, out, a, b, index, n, s);
    case STRATA_ELEMENT_I32: return binary<int32_t>(op, out, a, b, index, n, s);
    case STRATA_ELEMENT_I64: return binary<int64_t>(op, out, a, b, index, n, s);
    default: return cudaErrorInvalidValue;
  }
}

extern "C" cudaError_t strata_unary_grad(int32_t op, int32_t type, void* out, const void* g, const void* saved,
                                         const void* index, int64_t n, double p, double q, cudaStream_t s) {
  switch (type) {
    case STRATA_ELEMENT_F32: return unary_grad<float>(op, out, g, saved, index, n, p, q, s);
    case STRATA_ELEMENT_F64: return unary_grad<double>(op, out, g, saved, index, n, p, q, s);
    default: return cudaErrorInvalidValue;
  }
}

extern "C" cudaError_t strata_binary_grad(int32_t op, int32_t type, void* out, const void* g, const void* a,
                                          const void* b, const void* index, int64_t n, cudaStream_t s) {
  switch (type) {
    case STRATA_ELEMENT_F32: return binary_grad<float>(op, out, g, a, b, index, n, s);
    case STRATA_ELEMENT_F64: return binary_grad<double>(op, out, g, a, b, index, n, s);
    default: return cudaErrorInvalidValue;
  }
}
