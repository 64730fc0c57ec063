#include "common/step_timeline.h"

#include <cstdio>

namespace strata::examples {

void StepTimeline::begin(int64_t step) {
  if (traced(step)) timeline_.start_recording();
}

void StepTimeline::end(int64_t step) {
  if (!traced(step)) return;
  timeline_.stop_recording();
  timeline_.write(world_, o_.timeline);
  if (world_.rank() == 0)
    std::printf("wrote the timeline of step %lld to %s\n", static_cast<long long>(step), o_.timeline.c_str());
}

}  // namespace strata::examples
