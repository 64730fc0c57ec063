#include "strata/optim/grad_scaler.h"

#include <cmath>
#include <vector>

#include "optim/multi_tensor.h"
#include "strata/autograd/grad_mode.h"
#include "strata/ops/elementwise.h"
#include "strata/tensor/factory.h"

namespace strata::optim {

GradScaler::GradScaler(GradScalerOptions options) : options_(options), scale_(options.init_scale) {
  STRATA_CHECK(std::isfinite(options_.init_scale) && options_.init_scale > 0, "GradScaler: init_scale ",
               options_.init_scale, " must be finite and > 0");
  STRATA_CHECK(std::isfinite(options_.growth_factor) && options_.growth_factor > 1, "GradScaler: growth_factor ",
               options_.growth_factor, " must be > 1");
  STRATA_CHECK(options_.backoff_factor > 0 && options_.backoff_factor < 1, "GradScaler: backoff_factor ",
               options_.backoff_factor, " must be in (0, 1)");
  STRATA_CHECK(options_.growth_interval > 0, "GradScaler: growth_interval ", options_.growth_interval, " must be > 0");
}

Tensor GradScaler::scale(const Tensor& loss) const {
  if (!options_.enabled) return loss;
  return mul(loss, scale_);
}

void GradScaler::begin_unscale() {
  STRATA_CHECK(stage_ == Stage::Ready,
               "GradScaler.unscale: already called since the last update() (the "
               "gradients would be unscaled twice)");
}

void GradScaler::check_can_step() {
  STRATA_CHECK(stage_ != Stage::Stepped, "GradScaler.step: already called since the last update()");
}

void GradScaler::unscale(Optimizer& optimizer) {
  if (!options_.enabled) return;
  begin_unscale();
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const ParamGroup& group : optimizer.param_groups())
    for (const Tensor& p : group.params)
      if (p.grad().defined()) {
        STRATA_CHECK(p.grad().is_contiguous(), "GradScaler.unscale: a gradient of shape ", p.grad().shape(),
                     " is not contiguous; it is unscaled in place");
        grads.push_back(p.grad());
      }
  // torch takes the reciprocal in double and rounds it to float; for the power-of-two scales
  // of the defaults it is exact either way.
  found_inf_ = multi_tensor::unscale_and_check(grads, 1.0 / scale_);
  stage_ = Stage::Unscaled;
}

bool GradScaler::step(Optimizer& optimizer) { return step_with(optimizer); }

void GradScaler::update() {
  if (!options_.enabled) return;
  STRATA_CHECK(stage_ == Stage::Stepped, "GradScaler.update: no step() since the last update()");
  if (found_inf_) {
    scale_ *= options_.backoff_factor;
    growth_tracker_ = 0;
  } else if (++growth_tracker_ == options_.growth_interval) {
    scale_ *= options_.growth_factor;
    growth_tracker_ = 0;
  }
  stage_ = Stage::Ready;
}

StateDict GradScaler::state_dict() const {
  return {{"scale", scalar_tensor(scale_, {.dtype = DType::Float64})},
          {"growth_tracker", scalar_tensor(static_cast<double>(growth_tracker_), {.dtype = DType::Int64})}};
}

void GradScaler::load_state_dict(const StateDict& state) {
  for (const char* key : {"scale", "growth_tracker"}) {
    STRATA_CHECK(state.contains(key), "GradScaler.load_state_dict: key \"", key, "\" is missing");
    STRATA_CHECK(state.at(key).numel() == 1, "GradScaler.load_state_dict: \"", key, "\" has shape ",
                 state.at(key).shape(), ", expected one element");
  }
  STRATA_CHECK(state.size() == 2, "GradScaler.load_state_dict: ", state.size(),
               " entries, expected exactly \"scale\" and \"growth_tracker\"");
  const double scale = state.at("scale").item();
  const double tracker = state.at("growth_tracker").item();
  STRATA_CHECK(std::isfinite(scale) && scale > 0, "GradScaler.load_state_dict: \"scale\" is ", scale,
               " (expected finite and > 0)");
  STRATA_CHECK(tracker >= 0 && tracker < static_cast<double>(options_.growth_interval),
               "GradScaler.load_state_dict: \"growth_tracker\" is ", tracker, " (expected 0 to ",
               options_.growth_interval - 1, ")");
  scale_ = scale;
  growth_tracker_ = static_cast<int64_t>(tracker);
  stage_ = Stage::Ready;
}

}  // namespace strata::optim
