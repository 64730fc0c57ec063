// dropout (kernels in src/backend/cpu/dropout, src/backend/cuda/dropout).
#include "backend/cpu/dropout.h"

#include <cmath>

#include "backend/cuda/cuda_ops.h"
#include "backend/dispatch/device_dispatch.h"
#include "ops/autocast_cast.h"  // sixteen_bit
#include "ops/nn_common.h"
#include "strata/autograd/function.h"
#include "strata/ops/nn_functional.h"

namespace strata {
namespace {

// Forward and backward are the same kernel: keep where (seed, offset) keeps, scale by 1/(1-p).
Tensor apply(const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  return detail::on_device(
      "dropout", x.device(), [&] { return cpu::dropout_apply(x, p, seed, offset); },
      [&] { return cuda_ops::dropout_apply(x, p, seed, offset); });
}

}  // namespace

Tensor dropout(const Tensor& x, double p, bool train, Generator* gen) {
  // A 16-bit x: the kernel computes in float32 (mask and scale) and rounds once on store.
  STRATA_CHECK(x.defined(), "dropout: input is undefined");
  if (!detail::sixteen_bit(x)) detail::check_nn_input(x, "dropout", "input");
  STRATA_CHECK(p >= 0.0 && p < 1.0, "dropout: probability p must be in [0, 1), got ", p);
  if (!train || p == 0.0) return x;
  Generator& g = gen != nullptr ? *gen : default_generator();
  const uint64_t seed = g.seed(), offset = g.next_offset();
  Tensor out = apply(detail::contiguous_data(x), p, seed, offset);
  if (autograd::needs_grad({x})) {
    // The mask is regenerated from (seed, offset) rather than stored.
    autograd::record("DropoutBackward", {x}, {out}, {}, [p, seed, offset](autograd::BackwardContext& ctx) {
      return std::vector<Tensor>{apply(detail::contiguous_data(ctx.grad()), p, seed, offset)};
    });
  }
  return out;
}

}  // namespace strata
