// cat on CUDA: one device copy per input into its slice of a fresh output (cuda/copy.cpp:
// a strided kernel, or one cudaMemcpy where both sides are contiguous). Copies move bits,
// so the result is the CPU's exactly.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_ops.h"
#include "strata/tensor/factory.h"

namespace strata::cuda_ops {

Tensor cat(const std::vector<Tensor>& ts, size_t d, const Shape& out_shape, const char* op) {
  cuda_detail::check_device(ts[0].device(), op);
  Tensor out = empty(out_shape, {.dtype = ts[0].dtype(), .device = ts[0].device()});
  int64_t start = 0;
  for (const Tensor& t : ts) {
    const int64_t len = t.shape()[d];
    if (len > 0) cuda_detail::copy(out.narrow(static_cast<int64_t>(d), start, len), t);
    start += len;
  }
  return out;
}

}  // namespace strata::cuda_ops
