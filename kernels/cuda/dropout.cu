// Dropout on the GPU: one thread per Philox counter (4 elements), common/dropout.h's mask
// and the CPU's arithmetic (x * scale, then the select), so the same bits.
#include "strata_kernels/common/dropout.h"
#include "strata_kernels/common/storage16.h"
#include "strata_kernels/dropout.h"
#include "strata_kernels/elementwise.h"

namespace {

using namespace strata_kernels;

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535 * 8;

// S: the data's storage (T, or 16-bit with T float: widened on load, rounded on store).
template <class S, class T>
__global__ void dropout_kernel(S* y, const S* x, int64_t n, float p, T scale, uint64_t seed, uint64_t offset) {
  const int64_t counters = (n + 3) / 4;
  for (int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; c < counters; c += int64_t{gridDim.x} * blockDim.x) {
    const Philox4 r = philox4x32_10(static_cast<uint64_t>(c), offset, seed);
    for (int k = 0; k < 4; ++k) {
      const int64_t i = 4 * c + k;
      if (i >= n) break;
      const T v = static_cast<T>(widen(x[i])) * scale;
      store(y[i], dropout_keep(r.v[k], p) ? v : T(0));
    }
  }
}

template <class S, class T>
cudaError_t launch(void* y, const void* x, int64_t n, float p, double scale, uint64_t seed, uint64_t offset,
                   cudaStream_t stream) {
  const int64_t counters = (n + 3) / 4;
  if (counters == 0) return cudaSuccess;
  const int64_t want = (counters + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(want < kMaxBlocks ? want : kMaxBlocks);
  dropout_kernel<S, T><<<blocks, kThreads, 0, stream>>>(static_cast<S*>(y), static_cast<const S*>(x), n, p,
                                                        static_cast<T>(scale), seed, offset);
  return cudaGetLastError();
}

}  // namespace

extern "C" cudaError_t strata_dropout_apply(int32_t type, void* y, const void* x, int64_t n, float p, double scale,
                                            uint64_t seed, uint64_t offset, cudaStream_t stream) {
  if (type == STRATA_ELEMENT_F32) return launch<float, float>(y, x, n, p, scale, seed, offset, stream);
  if (type == STRATA_ELEMENT_F64) return launch<double, double>(y, x, n, p, scale, seed, offset, stream);
  if (type == STRATA_ELEMENT_BF16) return launch<Bf16Storage, float>(y, x, n, p, scale, seed, offset, stream);
  if (type == STRATA_ELEMENT_F16) return launch<HalfStorage, float>(y, x, n, p, scale, seed, offset, stream);
  return cudaErrorInvalidValue;
}
