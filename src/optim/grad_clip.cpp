#include "strata/optim/grad_clip.h"

#include <cmath>

#include "optim/multi_tensor.h"
#include "strata/autograd/grad_mode.h"

namespace strata::optim {
namespace {

// The defined gradients of `params`, contiguous (a non-contiguous one is copied: only the
// in-place scale needs them contiguous, and says so).
std::vector<Tensor> defined_grads(const std::vector<Tensor>& params) {
  std::vector<Tensor> grads;
  for (const Tensor& param : params)
    if (param.grad().defined()) grads.push_back(param.grad());
  return grads;
}

}  // namespace

double grad_norm_squared(const std::vector<Tensor>& params) {
  std::vector<Tensor> grads = defined_grads(params);
  for (Tensor& g : grads) g = g.contiguous();
  return multi_tensor::sum_of_squares(grads);
}

void scale_grads(const std::vector<Tensor>& params, double factor) {
  NoGradGuard no_grad;
  const std::vector<Tensor> grads = defined_grads(params);
  for (const Tensor& g : grads)
    STRATA_CHECK(g.is_contiguous(), "scale_grads: gradient of shape ", g.shape(),
                 " is not contiguous; it is scaled in place");
  multi_tensor::scale(grads, factor);
}

void check_total_norm(double norm, const ClipOptions& options, std::string_view who) {
  if (!options.error_if_nonfinite || std::isfinite(norm)) return;
  STRATA_FAIL(who, ": the total norm of the gradients is ", norm,
              " (non-finite), so they cannot be clipped; they are left unchanged. A nan or inf gradient usually "
              "comes from a nan or inf loss or an overflow in backward (autograd::DetectAnomaly names the op); "
              "skip this step, or set error_if_nonfinite = false to get the norm back instead");
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm, const ClipOptions& options) {
  STRATA_CHECK(std::isfinite(max_norm) && max_norm > 0, "clip_grad_norm: max_norm ", max_norm,
               " must be finite and > 0");
  const double norm = std::sqrt(grad_norm_squared(params));
  check_total_norm(norm, options, "clip_grad_norm");
  if (!std::isfinite(norm)) return norm;
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0) scale_grads(params, coef);
  return norm;
}

}  // namespace strata::optim
