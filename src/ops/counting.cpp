// nonzero and bincount: device-neutral checks, the device switch, and bincount's gradient
// in its weights (each weight's gradient is the output gradient at its bin).
#include "strata/ops/sorting.h"

#include <algorithm>

#include "backend/cpu/counting.h"
#include "backend/cpu/indexing.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/dispatch/device_dispatch.h"
#include "strata/autograd/function.h"

namespace strata {
namespace {

// The largest value of the 1-D int64 x (-1 when empty), refusing a negative one by value and
// position. On CUDA x is read through a host copy: a synchronisation, which the result's
// length needs anyway (torch reads the minimum and maximum back too).
int64_t checked_max(const Tensor& x) {
  const Tensor host = x.detach().to(Device::cpu()).contiguous();
  const int64_t* v = host.data<int64_t>();
  int64_t max = -1;
  for (int64_t i = 0; i < host.numel(); ++i) {
    STRATA_CHECK(v[i] >= 0, "bincount: input (shape ", x.shape(), ") holds the negative value ", v[i], " at position ",
                 i, "; only non-negative values can be counted");
    max = std::max(max, v[i]);
  }
  return max;
}

void check_bincount(const Tensor& x, const Tensor& weights, int64_t minlength) {
  STRATA_CHECK(x.defined(), "bincount: input is undefined");
  STRATA_CHECK(x.dtype() == DType::Int64, "bincount: input has dtype ", x.dtype(), " (shape ", x.shape(),
               "); int64 expected");
  STRATA_CHECK(x.dim() == 1, "bincount: input must be 1-D, got shape ", x.shape());
  STRATA_CHECK(minlength >= 0, "bincount: minlength must be non-negative, got ", minlength);
  if (!weights.defined()) return;
  detail::common_device("bincount", {{"input", x}, {"weights", weights}});
  STRATA_CHECK(weights.dtype() == DType::Float32 || weights.dtype() == DType::Float64, "bincount: weights have dtype ",
               weights.dtype(), " (shape ", weights.shape(), "); float32 or float64 expected (convert with .to())");
  STRATA_CHECK(weights.shape() == x.shape(), "bincount: weights (shape ", weights.shape(),
               ") must have the input's shape ", x.shape());
}

}  // namespace

Tensor nonzero(const Tensor& x) {
  STRATA_CHECK(x.defined(), "nonzero: input is undefined");
  return detail::on_device(
      "nonzero", x.device(), [&] { return cpu::nonzero(x.detach()); }, [&] { return cuda_ops::nonzero(x.detach()); });
}

Tensor bincount(const Tensor& x, const Tensor& weights, int64_t minlength) {
  check_bincount(x, weights, minlength);
  const int64_t length = std::max(checked_max(x) + 1, minlength);
  const Tensor idx = x.detach().contiguous();
  const Tensor w = weights.defined() ? weights.detach() : weights;
  Tensor out = detail::on_device(
      "bincount", x.device(), [&] { return cpu::bincount(idx, w, length); },
      [&] { return cuda_ops::bincount(idx, w, length); });
  if (weights.defined() && autograd::needs_grad({weights})) {
    autograd::record("BincountBackward", {weights}, {out}, {idx}, [idx, length](autograd::BackwardContext& ctx) {
      const Tensor g = ctx.grad().contiguous();
      // d out[v] / d weights[i] = (x[i] == v): weights' gradient is g gathered at x.
      return std::vector<Tensor>{detail::on_device(
          "bincount backward", g.device(), [&] { return cpu::index_select(g, 0, idx); },
          [&] {
            return cuda_ops::embedding_forward(idx, g.view({length, 1})).view({idx.numel()});
          })};
    });
  }
  return out;
}

}  // namespace strata
