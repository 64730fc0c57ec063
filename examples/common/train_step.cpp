#include "common/train_step.h"

#include <cstdlib>
#include <limits>
#include <optional>

#include "strata/ops/autocast.h"
#include "strata/ops/elementwise.h"

namespace strata::examples {
namespace {

// Test hook (tests/examples/nonfinite_loss_checks.sh): the loss of step
// STRATA_TEST_NAN_LOSS_AT_STEP (0-based, as the other STRATA_TEST_ hooks; the log calls it
// step N + 1) reads as nan on every rank, as after an overflow; the gradients stay as computed.
double injected_loss(int64_t step, double loss) {
  static const char* at = std::getenv("STRATA_TEST_NAN_LOSS_AT_STEP");
  if (at != nullptr && std::atoll(at) == step) return std::numeric_limits<double>::quiet_NaN();
  return loss;
}

}  // namespace

StepResult train_step(int64_t step, nn::CausalLM& model, parallel::Pipeline* pipeline, const data::Batch& batch,
                      DataParallelTrainer& trainer, StepTimeline& timeline) {
  profile::Timeline& spans = timeline.timeline();
  timeline.begin(step);
  StepResult result;
  {
    auto step_span = spans.span("training step", "step", {{"step", step}});
    double loss = 0;
    const std::optional<DType> autocast = trainer.autocast();
    if (pipeline != nullptr) {
      pipeline->set_loss_scale(trainer.loss_scale());
      autocast::Scope scope(autocast.value_or(DType::BFloat16), autocast.has_value());
      loss = pipeline->train_step(batch.inputs, batch.targets);  // its spans per micro-batch
    } else {
      Tensor l;
      {
        auto span = spans.span("forward", "compute");
        autocast::Scope scope(autocast.value_or(DType::BFloat16), autocast.has_value());
        l = model.loss(batch.inputs, batch.targets);
      }
      auto span = spans.span("backward (with DDP/ZeRO reductions)", "compute");
      // fp16: the scaled loss, so that small gradients do not flush to zero (1: unchanged).
      (trainer.loss_scale() == 1.0 ? l : mul(l, trainer.loss_scale())).backward();
      loss = l.item();
    }
    auto span = spans.span("optimizer (clip, step, loss average)", "optimizer");
    result = trainer.step(step, injected_loss(step, loss));
  }
  timeline.end(step);
  return result;
}

}  // namespace strata::examples
