#include "common/step_timeline.h"

#include <cstdio>

#include "strata/profile/profiler_spans.h"

namespace strata::examples {

void StepTimeline::begin(int64_t step) {
  if (traced(step)) timeline_.start_recording();
  if (profiled(step)) profile_ = std::make_unique<profiler::Session>();
}

void StepTimeline::end(int64_t step) {
  if (profiled(step) && profile_) {
    const std::string table = profile_->table();  // every rank reads its own session
    if (traced(step)) profile::add_profiler_spans(timeline_, profile_->spans());
    profile_.reset();
    if (world_.rank() == 0)
      std::printf("profile of step %lld (rank 0):\n%s", static_cast<long long>(step), table.c_str());
  }
  if (!traced(step)) return;
  timeline_.stop_recording();
  timeline_.write(world_, o_.timeline);
  if (world_.rank() == 0)
    std::printf("wrote the timeline of step %lld to %s\n", static_cast<long long>(step), o_.timeline.c_str());
}

}  // namespace strata::examples
