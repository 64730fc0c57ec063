#include "common/model_training.h"

#include <exception>
#include <string>
#include <utility>

#include "common/pipeline_setup.h"
#include "strata/parallel/tp_factory.h"

namespace strata::examples {

namespace {

// With --pp a stage may hold a copy of a parameter another stage holds too (GPT's tied
// embedding): gradient norms count it once, and only the other stage saves it.
std::function<bool(const std::string&)> stage_duplicates(const nn::CausalLM& model, const Layout& layout) {
  if (layout.pipeline == nullptr) return {};
  return parallel::duplicate_parameters(model, *layout.pipeline);
}

// The model on the layout's --device, before anything (optimizer, flat buffers) sees its
// parameters.
nn::CausalLM& on_device(nn::CausalLM& model, Device device) {
  if (device.is_cuda()) model.to(device);
  return model;
}

}  // namespace

ModelTraining::ModelTraining(nn::CausalLM& model, const train::ModelFamily& family, const Layout& layout,
                             const parallel::PipelinePartition& partition, const TrainOptions& o,
                             dist::ProcessGroup& world)
    : model_(on_device(model, layout.device)),
      layout_(layout),
      o_(o),
      world_(world),
      duplicate_(stage_duplicates(model, layout)),
      trainer_(model, *layout.replicas, o, family.zero3_unit, layout.tensor, layout.pipeline, duplicate_,
               layout.expert_data),
      step_timeline_(o, world),
      pipeline_(make_pipeline(model, layout, partition, o, trainer_, step_timeline_.timeline())) {}

StepResult ModelTraining::step(int64_t step, const data::Batch& batch) {
  data::Batch here{batch.inputs.to(layout_.device), batch.targets.to(layout_.device)};
  if (!layout_.context) return train_step(step, model_, pipeline_.get(), here, trainer_, step_timeline_);
  // --cp: this rank's chunks of every sequence, and the split set for this step only, so
  // that evaluation and generation see whole sequences.
  here = {layout_.context->local(here.inputs, 1).contiguous(), layout_.context->local(here.targets, 1).contiguous()};
  struct SplitForThisStep {
    nn::CausalLM& model;
    ~SplitForThisStep() { model.set_context_split(nullptr); }
  } split{model_};
  model_.set_context_split(layout_.context);
  return train_step(step, model_, pipeline_.get(), here, trainer_, step_timeline_);
}

StepResult step_keeping_checkpoints(ModelTraining& training, Checkpointing& checkpointing, int64_t step,
                                    const data::Batch& batch) {
  try {
    return training.step(step, batch);
  } catch (const NonFiniteStep&) {
    checkpointing.complete_pending();
    throw;
  } catch (const std::exception& e) {
    // Out of memory (the allocator names the bytes requested and free) or any other failure:
    // said with the step. The caller ends the process with status 1; under mpirun that ends
    // every rank, including those waiting for this one in a collective.
    throw Error("step " + std::to_string(step + 1) + "/" + std::to_string(training.total_steps()) +
                " failed: " + e.what());
  }
}

train::CheckpointTarget ModelTraining::checkpoint_target(data::BatchSampler& sampler, checkpoint::Metadata config) {
  auto* tp_factory = dynamic_cast<parallel::TensorParallelFactory*>(layout_.factory.get());
  config.erase("config.param_dtype");
  return {.model = model_,
          .world = world_,
          .zero = trainer_.zero(),
          .data = layout_.replicas,
          .expert_data = layout_.expert_data,
          .tensor = layout_.tensor,
          .duplicate = duplicate_,
          .sampler = &sampler,
          .scheduler = &trainer_.schedule(),
          .rng_tracker = tp_factory != nullptr ? &tp_factory->rng_tracker() : nullptr,
          .loss_scaler = &trainer_.loss_scaler(),
          .config = std::move(config),
          .layout = {{"pipeline", std::to_string(o_.pp)},
                     {"context", std::to_string(o_.cp)},
                     {"schedule", o_.schedule},
                     {"param_dtype", o_.param_dtype}}};
}

}  // namespace strata::examples
