// Rotary position embedding (kernels in src/backend/cpu/rotary, src/backend/cuda/rotary).
#include "backend/cpu/rotary.h"

#include <cmath>

#include "backend/cuda/cuda_ops.h"
#include "backend/dispatch/device_dispatch.h"
#include "ops/autocast_cast.h"
#include "ops/nn_common.h"
#include "strata/autograd/function.h"
#include "strata/ops/nn_functional.h"
#include "strata/tensor/factory.h"

namespace strata {

RotaryTables rotary_tables(int64_t length, int64_t head_dim, double theta, int64_t offset, DType dtype) {
  STRATA_CHECK(length >= 0 && offset >= 0, "rotary_tables: length and offset must be >= 0, got length ", length,
               " and offset ", offset);
  STRATA_CHECK(head_dim > 0 && head_dim % 2 == 0, "rotary_tables: head_dim must be even and > 0, got ", head_dim);
  STRATA_CHECK(theta > 0 && std::isfinite(theta), "rotary_tables: theta must be finite and > 0, got ", theta);
  STRATA_CHECK(dtype == DType::Float32 || dtype == DType::Float64,
               "rotary_tables: dtype must be float32 or float64, got ", dtype);
  RotaryTables r{empty({length, head_dim}, {.dtype = dtype}), empty({length, head_dim}, {.dtype = dtype})};
  cpu::rotary_fill_tables(r.cos, r.sin, offset, theta);
  return r;
}

Tensor rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  // A 16-bit x with float32 tables: the kernel rotates in float32 and rounds once on store.
  STRATA_CHECK(x.defined(), "rotary_embedding: x is undefined");
  const bool x16 = detail::sixteen_bit(x) && cos.defined() && cos.dtype() == DType::Float32;
  if (!x16) detail::check_nn_input(x, "rotary_embedding", "x");
  const DType table_dtype = x16 ? DType::Float32 : x.dtype();
  STRATA_CHECK(x.dim() >= 2, "rotary_embedding: x must be [..., T, D] (e.g. [B, H, T, D]), got shape ", x.shape());
  const int64_t t = x.size(-2), d = x.size(-1);
  STRATA_CHECK(d % 2 == 0, "rotary_embedding: the head dimension D must be even, got x of shape ", x.shape());
  for (const auto& [table, name] : {std::pair{cos, "cos"}, std::pair{sin, "sin"}}) {
    detail::check_nn_input(table, "rotary_embedding", name);
    STRATA_CHECK(table.dtype() == table_dtype, "rotary_embedding: ", name, " has dtype ", table.dtype(), " but x has ",
                 x.dtype());
    STRATA_CHECK(table.shape() == Shape({t, d}), "rotary_embedding: ", name, " must be [T, D] = [", t, ", ", d,
                 "] for x of shape ", x.shape(), ", got ", table.shape());
    STRATA_CHECK(!autograd::needs_grad({table}), "rotary_embedding: ", name,
                 " requires grad, but the tables are constants here (no gradient reaches them); pass it detached");
  }
  const Device device = detail::common_device("rotary_embedding", {{"x", x}, {"cos", cos}, {"sin", sin}});
  Tensor xc = detail::contiguous_data(x), cc = detail::contiguous_data(cos), sc = detail::contiguous_data(sin);
  Tensor out = detail::on_device(
      "rotary_embedding", device, [&] { return cpu::rotary_apply(xc, cc, sc, false); },
      [&] { return cuda_ops::rotary_apply(xc, cc, sc, false); });
  // cos and sin are constants of the position: only x receives a gradient.
  if (autograd::needs_grad({x})) {
    autograd::record("RotaryEmbeddingBackward", {x}, {out}, {cc, sc}, [cc, sc](autograd::BackwardContext& ctx) {
      Tensor go = detail::contiguous_data(ctx.grad());
      Tensor dx = detail::on_device(
          "rotary_embedding backward", go.device(), [&] { return cpu::rotary_apply(go, cc, sc, true); },
          [&] { return cuda_ops::rotary_apply(go, cc, sc, true); });
      return std::vector<Tensor>{dx};
    });
  }
  return out;
}

}  // namespace strata
