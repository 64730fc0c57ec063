#include "cuda/executor.cuh"
#include "strata_kernels/common/grad_ops.h"
#include "strata_kernels/multi_tensor_grad.h"

namespace {

using namespace strata_kernels;

template <template <class> class Op, class T>
cudaError_t reduce(const void* tensors, const void* chunks, int64_t n_chunks, void* partials, cudaStream_t stream) {
  return launch_reduce_chunks(static_cast<const GradTensor<T>*>(tensors), static_cast<const TensorChunk*>(chunks),
                              n_chunks, static_cast<typename Op<T>::Acc*>(partials), Op<T>{}, stream);
}

template <class T>
cudaError_t scale(const void* tensors, const void* chunks, int64_t n_chunks, cudaStream_t stream) {
  return launch_for_each_chunk(static_cast<const GradTensor<T>*>(tensors), static_cast<const TensorChunk*>(chunks),
                               n_chunks, ScaleOp<T>{}, stream);
}

}  // namespace

extern "C" cudaError_t strata_sum_of_squares_f32(const void* t, const void* c, int64_t n, void* p, cudaStream_t s) {
  return reduce<SumOfSquaresOp, float>(t, c, n, p, s);
}
extern "C" cudaError_t strata_sum_of_squares_f64(const void* t, const void* c, int64_t n, void* p, cudaStream_t s) {
  return reduce<SumOfSquaresOp, double>(t, c, n, p, s);
}
extern "C" cudaError_t strata_unscale_check_f32(const void* t, const void* c, int64_t n, void* p, cudaStream_t s) {
  return reduce<UnscaleCheckOp, float>(t, c, n, p, s);
}
extern "C" cudaError_t strata_unscale_check_f64(const void* t, const void* c, int64_t n, void* p, cudaStream_t s) {
  return reduce<UnscaleCheckOp, double>(t, c, n, p, s);
}
extern "C" cudaError_t strata_scale_f32(const void* t, const void* c, int64_t n, cudaStream_t s) {
  return scale<float>(t, c, n, s);
}
extern "C" cudaError_t strata_scale_f64(const void* t, const void* c, int64_t n, cudaStream_t s) {
  return scale<double>(t, c, n, s);
}
