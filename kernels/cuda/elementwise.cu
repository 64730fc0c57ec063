// The elementwise ops on the GPU: one grid-stride kernel per (functor, number of inputs),
// the functors being common/elementwise_ops.h's, which the CPU loops instantiate too.
#include <type_traits>

#include "common/elementwise_ops.h"
#include "common/strided_index.h"
#include "strata_kernels/elementwise.h"

namespace {

using namespace strata_kernels;

constexpr int kThreads = 256;

// out[i] = f(inputs at i): a flat index where every input is contiguous and unbroadcast,
// else each input's offset from the strided index.
template <class T, int N, class F>
__global__ void map_kernel(T* out, StridedIndex<N> index, int64_t n, bool flat, F f, const T* in0, const T* in1,
                           const T* in2) {
  const T* in[3] = {in0, in1, in2};
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x) {
    int64_t off[N];
    if (flat) {
      for (int k = 0; k < N; ++k) off[k] = i;
    } else {
      index.offsets(i, off);
    }
    if constexpr (N == 1) out[i] = f(in[0][off[0]]);
    if constexpr (N == 2) out[i] = f(in[0][off[0]], in[1][off[1]]);
    if constexpr (N == 3) out[i] = f(in[0][off[0]], in[1][off[1]], in[2][off[2]]);
  }
}

// True when every input reads element i at offset i.
template <int N>
bool is_flat(const StridedIndex<N>& index) {
  for (int k = 0; k < N; ++k) {
    int64_t expected = 1;
    for (int d = index.ndim - 1; d >= 0; --d) {
      if (index.sizes[d] != 1 && index.strides[k][d] != expected) return false;
      expected *= index.sizes[d];
    }
  }
  return true;
}

template <class T, int N, class F>
cudaError_t launch(F f, void* out, const void* index, int64_t n, cudaStream_t stream, const void* in0,
                   const void* in1 = nullptr, const void* in2 = nullptr) {
  if (n == 0) return cudaSuccess;
  const StridedIndex<N> idx = *static_cast<const StridedIndex<N>*>(index);
  const int64_t want = (n + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(want < 65535 * 8 ? want : 65535 * 8);
  map_kernel<T, N, F><<<blocks, kThreads, 0, stream>>>(static_cast<T*>(out), idx, n, is_flat(idx), f,
                                                        static_cast<const T*>(in0), static_cast<const T*>(in1),
                                                        static_cast<const T*>(in2));
  return cudaGetLastError();
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
cudaError_t unary_grad(int32_t op, void* out, const void* g, const void* saved, const void* index, int64_t n,
                       double p, double q, cudaStream_t s) {
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
