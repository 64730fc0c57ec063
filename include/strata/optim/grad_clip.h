#pragma once
#include <string_view>
#include <vector>

#include "strata/tensor/tensor.h"

namespace strata::optim {

// Sum of squares of every element of every defined gradient of `params`, accumulated in
// double in one fixed order (the same bits on CPU and GPU, for any thread count; parameters
// without a gradient are skipped). ZeRO adds these across shards before taking the square
// root. One pass per (device, dtype) over all gradients.
double grad_norm_squared(const std::vector<Tensor>& params);

// Multiplies every defined gradient of `params` by `factor`, in place (gradients must be
// contiguous, as accumulated gradients and DDP bucket views are).
void scale_grads(const std::vector<Tensor>& params, double factor);

struct ClipOptions {
  // torch's error_if_nonfinite: a total norm of nan or inf throws strata::Error naming it,
  // the gradients untouched. Off: the norm is returned and the caller decides.
  bool error_if_nonfinite = false;
};

// Clips the total L2 norm of the gradients to `max_norm` (> 0), as
// torch.nn.utils.clip_grad_norm_: the gradients are scaled in place by
// max_norm / (norm + 1e-6) when that coefficient is below 1. Returns the norm before
// clipping. When the norm is inf or nan the gradients are left as they are (torch would
// scale them to nan) and it is returned, or with options.error_if_nonfinite thrown.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm, const ClipOptions& options = {});

// The error_if_nonfinite check every clip_grad_norm (ZeRO's, tensor parallelism's) runs on
// its total norm: throws naming `who` and the norm when it is nan or inf and the option is set.
void check_total_norm(double norm, const ClipOptions& options, std::string_view who);

}  // namespace strata::optim
