#include "common/pipeline_setup.h"

#include "strata/core/error.h"

namespace strata::examples {

void check_pipeline_options(const TrainOptions& o, int64_t layers, bool exporting) {
  STRATA_CHECK(o.pp == 1 || !exporting, "--export-hf does not support --pp ", o.pp,
               ": each rank holds only its stage; save a checkpoint (--save) and export it with "
               "`strata-ckpt export`");
  const int64_t stages = o.pp * pipeline_chunks(o);
  STRATA_CHECK(o.pp == 1 || layers >= stages, "--layers ", layers, " is fewer than the ", stages,
               " pipeline stages (--pp x --chunks): every stage needs a block");
}

int pipeline_chunks(const TrainOptions& o) { return o.schedule == "interleaved" ? static_cast<int>(o.chunks) : 1; }

parallel::PipelinePartition pipeline_partition(const TrainOptions& o, const nn::ParameterCounts& counts,
                                               int64_t layers) {
  return parallel::balanced_partition(counts, layers, static_cast<int>(o.pp), pipeline_chunks(o));
}

nn::ModelPart stage_of(const Layout& layout, const parallel::PipelinePartition& partition) {
  if (layout.pipeline == nullptr) return {};
  return parallel::stage_part(partition, layout.pipeline->size(), layout.pipeline->rank());
}

double whole_model_step_flops(int64_t parameters, int64_t layers, int64_t width, int64_t context,
                              int64_t global_batch) {
  const double tokens = static_cast<double>(global_batch * context);
  return 6.0 * static_cast<double>(parameters) * tokens +
         12.0 * static_cast<double>(layers * global_batch) * static_cast<double>(context * context * width);
}

std::unique_ptr<parallel::Pipeline> make_pipeline(nn::CausalLM& model, const Layout& layout,
                                                  const parallel::PipelinePartition& partition, const TrainOptions& o,
                                                  DataParallelTrainer& trainer, profile::Timeline& timeline) {
  if (layout.pipeline == nullptr) return nullptr;
  const auto kind = o.schedule == "gpipe"         ? parallel::PipelineScheduleKind::GPipe
                    : o.schedule == "interleaved" ? parallel::PipelineScheduleKind::Interleaved1F1B
                                                  : parallel::PipelineScheduleKind::OneFOneB;
  return std::make_unique<parallel::Pipeline>(
      model, *layout.pipeline, partition,
      parallel::PipelineOptions{.schedule = kind,
                                .micro_batches = static_cast<int>(micro_batches(o)),
                                .chunks = pipeline_chunks(o),
                                .zero = trainer.zero(),
                                .timeline = &timeline});
}

}  // namespace strata::examples
