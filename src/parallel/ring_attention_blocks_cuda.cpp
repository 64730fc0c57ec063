// CUDA glue of ring attention's block steps (kernels/cuda/attention_block.cu runs
// common/attention_block.h, as the CPU does): tensors to pointers, one launch per step on the
// current stream.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/float_element_type.h"
#include "parallel/ring_attention_blocks.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/attention_block.h"

namespace strata::parallel::ring_cuda {
namespace {

constexpr const char* kOp = "ring attention block";
using Launch = cuda_detail::OpScope;

Shape row_values_shape(const Tensor& scores) {
  Shape shape = scores.shape();
  shape[shape.size() - 1] = 1;
  return shape;
}

}  // namespace

RingBlockSoftmax ring_block_softmax(const Tensor& scores, double scale, bool causal) {
  Launch l(scores, kOp);
  const TensorOptions like{.dtype = scores.dtype(), .device = scores.device()};
  RingBlockSoftmax out{empty(scores.shape(), like), empty(row_values_shape(scores), like)};
  const int64_t c = scores.size(-1);
  if (scores.numel() == 0) return out;
  STRATA_LAUNCH(strata_ring_block_softmax(cuda_detail::float_element_type(scores.dtype(), kOp), scores.data_ptr(),
                                          out.probs.data_ptr(), out.lse.data_ptr(), scores.numel() / c, c, scale,
                                          causal, l.stream));
  return out;
}

Tensor ring_block_probs(const Tensor& scores, const Tensor& lse, double scale, bool causal) {
  Launch l(scores, kOp);
  Tensor probs = empty(scores.shape(), {.dtype = scores.dtype(), .device = scores.device()});
  const int64_t c = scores.size(-1);
  if (scores.numel() == 0) return probs;
  STRATA_LAUNCH(strata_ring_block_probs(cuda_detail::float_element_type(scores.dtype(), kOp), scores.data_ptr(),
                                        lse.data_ptr(), probs.data_ptr(), scores.numel() / c, c, scale, causal,
                                        l.stream));
  return probs;
}

Tensor ring_block_score_grad(Tensor dp, const Tensor& probs, const Tensor& delta, double scale) {
  Launch l(dp, kOp);
  const int64_t c = dp.size(-1);
  if (dp.numel() == 0) return dp;
  STRATA_LAUNCH(strata_ring_block_score_grad(cuda_detail::float_element_type(dp.dtype(), kOp), dp.data_ptr(),
                                             probs.data_ptr(), delta.data_ptr(), dp.numel() / c, c, scale, l.stream));
  return dp;
}

}  // namespace strata::parallel::ring_cuda
