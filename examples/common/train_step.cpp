#include "common/train_step.h"

namespace strata::examples {

StepResult train_step(int64_t step, nn::CausalLM& model, parallel::Pipeline* pipeline, const data::Batch& batch,
                      DataParallelTrainer& trainer, StepTimeline& timeline) {
  profile::Timeline& spans = timeline.timeline();
  timeline.begin(step);
  StepResult result;
  {
    auto step_span = spans.span("training step", "step", {{"step", step}});
    double loss = 0;
    if (pipeline != nullptr) {
      loss = pipeline->train_step(batch.inputs, batch.targets);  // its spans per micro-batch
    } else {
      Tensor l;
      {
        auto span = spans.span("forward", "compute");
        l = model.loss(batch.inputs, batch.targets);
      }
      auto span = spans.span("backward (with DDP/ZeRO reductions)", "compute");
      l.backward();
      loss = l.item();
    }
    auto span = spans.span("optimizer (clip, step, loss average)", "optimizer");
    result = trainer.step(loss);
  }
  timeline.end(step);
  return result;
}

}  // namespace strata::examples
