#include "backend/cpu/dropout.h"

#include <algorithm>

#include "backend/cpu/multiversion.h"
#include "backend/cpu/row_storage.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/common/dropout.h"
#include "tensor/dtype_dispatch.h"

namespace strata::cpu {
namespace {

constexpr int64_t kParallelThreshold = 16384;  // elements
constexpr int64_t kGroup = 64;                 // Philox counters per group (4 elements each)

// S: the data's storage (T, or 16-bit with T float: widened on load, rounded on store).
template <class S, class T>
STRATA_MULTIVERSION void dropout_kernel(const S* x, S* y, int64_t n, float p, T scale, uint64_t seed, uint64_t offset) {
  const int64_t blocks = (n + 3) / 4;
  const int64_t groups = (blocks + kGroup - 1) / kGroup;
#pragma omp parallel for if (n > kParallelThreshold) schedule(static)
  for (int64_t grp = 0; grp < groups; ++grp) {
    // Generate a group's random words first (a vector loop over counters), then apply
    // them in element order (a second vector loop).
    const int64_t c0 = grp * kGroup, count = std::min(kGroup, blocks - c0);
    uint32_t words[4 * kGroup];
#pragma omp simd
    for (int64_t c = 0; c < count; ++c) {
      const strata_kernels::Philox4 r = strata_kernels::philox4x32_10(static_cast<uint64_t>(c0 + c), offset, seed);
      words[4 * c] = r.v[0];
      words[4 * c + 1] = r.v[1];
      words[4 * c + 2] = r.v[2];
      words[4 * c + 3] = r.v[3];
    }
    const int64_t base = 4 * c0, len = std::min(4 * count, n - base);
#pragma omp simd
    for (int64_t k = 0; k < len; ++k) {
      const T v = static_cast<T>(strata_kernels::widen(x[base + k])) * scale;
      strata_kernels::store(y[base + k], strata_kernels::dropout_keep(words[k], p) ? v : T(0));
    }
  }
}

}  // namespace

Tensor dropout_apply(const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  Tensor out = empty_like(x);
  dispatch_row_storage(x.dtype(), x.dtype(), "dropout", [&]<class S, class T, class>() {
    dropout_kernel(storage<const S>(x), storage<S>(out), x.numel(), static_cast<float>(p),
                   static_cast<T>(1.0 / (1.0 - p)), seed, offset);
  });
  return out;
}

}  // namespace strata::cpu
