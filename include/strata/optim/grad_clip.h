#pragma once
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

// Clips the total L2 norm of the gradients to `max_norm` (> 0), as
// torch.nn.utils.clip_grad_norm_: the gradients are scaled in place by
// max_norm / (norm + 1e-6) when that coefficient is below 1. Returns the norm before
// clipping. When the norm is inf or nan it is returned and the gradients are left as they
// are (torch would scale them to nan): the caller decides, e.g. skips the step.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

}  // namespace strata::optim
