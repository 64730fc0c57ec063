#pragma once
// Dynamic loss scaling for float16 training, as torch.cuda.amp.GradScaler: the loss is
// multiplied by a scale before backward so that small float16 gradients do not flush to
// zero; the gradients are divided by it before the step; a step whose gradients hold inf or
// nan is skipped and the scale shrinks, and after growth_interval good steps in a row it
// grows.
//   optim::GradScaler scaler;
//   scaler.scale(loss).backward();
//   scaler.unscale(optimizer);                  // optional: before clip_grad_norm
//   optim::clip_grad_norm(params, 1.0);
//   scaler.step(optimizer);                     // false when skipped
//   scaler.update();
// Gradients may be on any device (CPU or CUDA, float32 or float64); unscaling is one
// multi-tensor pass per (device, dtype). Under DDP every rank unscales the same reduced
// gradients and so takes the same decision. With the default power-of-two scale and factors
// the unscaled gradients equal unscaled training's bit for bit (barring overflow and
// underflow, which is what the scaling is for).
#include <concepts>
#include <cstdint>

#include "strata/optim/optimizer.h"
#include "strata/tensor/state_dict.h"
#include "strata/tensor/tensor.h"

namespace strata::optim {

// An optimizer over gradient shards: `unscale_gradients(factor)` multiplies its shard in
// place and returns whether any rank found inf or nan; `step()` updates.
template <class T>
concept ShardedOptimizer = requires(T& o) {
  { o.unscale_gradients(1.0) } -> std::same_as<bool>;
  o.step();
};

// torch's defaults.
struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;   // > 1
  double backoff_factor = 0.5;  // in (0, 1)
  int64_t growth_interval = 2000;
  bool enabled = true;  // false: every call is a pass-through (scale 1, always step)
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  // loss * scale (loss itself when disabled).
  Tensor scale(const Tensor& loss) const;
  // Divides the gradients of `optimizer`'s parameters by the scale, in place, and records
  // whether any was inf or nan. At most once between update() calls (a second call
  // throws: it would unscale twice).
  void unscale(Optimizer& optimizer);
  // Unscales (unless unscale() already ran) and steps the optimizer unless a gradient was
  // inf or nan. Returns whether it stepped.
  bool step(Optimizer& optimizer);
  // The same for an optimizer over sharded gradients (parallel::ZeroOptimizer), which
  // unscales its own shard and agrees with the other ranks on inf/nan.
  template <ShardedOptimizer Sharded>
  void unscale(Sharded& optimizer) {
    if (!options_.enabled) return;
    begin_unscale();
    found_inf_ = optimizer.unscale_gradients(1.0 / scale_);
    stage_ = Stage::Unscaled;
  }
  template <ShardedOptimizer Sharded>
  bool step(Sharded& optimizer) {
    return step_with(optimizer);
  }
  // After step(): backs off (found inf/nan) or counts a good step and grows the scale after
  // growth_interval of them. Throws when called without a step() since the last update().
  void update();

  double scale_value() const { return scale_; }
  // Whether the last unscale() found inf or nan.
  bool found_inf() const { return found_inf_; }
  const GradScalerOptions& options() const { return options_; }

  // "scale" (float64) and "growth_tracker" (int64), restored bit for bit.
  StateDict state_dict() const;
  void load_state_dict(const StateDict& state);

 private:
  enum class Stage { Ready, Unscaled, Stepped };
  void begin_unscale();   // throws when this step was already unscaled
  void check_can_step();  // throws when this step already stepped
  // step() for either kind of optimizer: unscale unless done, step unless inf/nan.
  template <class Any>
  bool step_with(Any& optimizer) {
    if (!options_.enabled) {
      optimizer.step();
      return true;
    }
    check_can_step();
    if (stage_ == Stage::Ready) unscale(optimizer);
    stage_ = Stage::Stepped;
    if (found_inf_) return false;
    optimizer.step();
    return true;
  }
  GradScalerOptions options_;
  double scale_;
  int64_t growth_tracker_ = 0;
  bool found_inf_ = false;
  Stage stage_ = Stage::Ready;
};

}  // namespace strata::optim
