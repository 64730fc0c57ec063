#include "cuda/executor.cuh"
#include "strata_kernels/common/fused_adam.h"
#include "strata_kernels/common/fused_lion.h"
#include "strata_kernels/common/fused_sgd.h"
#include "strata_kernels/multi_tensor_optim.h"

namespace {

using namespace strata_kernels;

template <template <class> class Entry, template <class> class Op, class T>
cudaError_t launch(const void* tensors, const void* chunks, int64_t n_chunks, cudaStream_t stream) {
  return launch_for_each_chunk(static_cast<const Entry<T>*>(tensors), static_cast<const TensorChunk*>(chunks), n_chunks,
                               Op<T>{}, stream);
}

}  // namespace

extern "C" cudaError_t strata_fused_adam_f32(const void* t, const void* c, int64_t n, cudaStream_t s) {
  return launch<AdamTensor, FusedAdamOp, float>(t, c, n, s);
}
extern "C" cudaError_t strata_fused_adam_f64(const void* t, const void* c, int64_t n, cudaStream_t s) {
  return launch<AdamTensor, FusedAdamOp, double>(t, c, n, s);
}
extern "C" cudaError_t strata_fused_sgd_f32(const void* t, const void* c, int64_t n, cudaStream_t s) {
  return launch<SgdTensor, FusedSgdOp, float>(t, c, n, s);
}
extern "C" cudaError_t strata_fused_sgd_f64(const void* t, const void* c, int64_t n, cudaStream_t s) {
  return launch<SgdTensor, FusedSgdOp, double>(t, c, n, s);
}
extern "C" cudaError_t strata_fused_lion_f32(const void* t, const void* c, int64_t n, cudaStream_t s) {
  return launch<LionTensor, FusedLionOp, float>(t, c, n, s);
}
extern "C" cudaError_t strata_fused_lion_f64(const void* t, const void* c, int64_t n, cudaStream_t s) {
  return launch<LionTensor, FusedLionOp, double>(t, c, n, s);
}
