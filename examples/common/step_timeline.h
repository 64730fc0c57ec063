#pragma once
// --timeline: a Chrome-trace/Perfetto timeline of one training step (--timeline-step) of
// every rank, written to one file by rank 0. --profile-step: an op profile of one step
// (strata/profiler/profiler.h), printed by rank 0; when it is the traced step too, its op
// spans join the timeline.
#include <cstdint>
#include <memory>

#include "common/train_options.h"
#include "strata/distributed/process_group.h"
#include "strata/profile/timeline.h"
#include "strata/profiler/profiler.h"

namespace strata::examples {

class StepTimeline {
 public:
  StepTimeline(const TrainOptions& o, dist::ProcessGroup& world) : o_(o), world_(world) {}

  // The timeline the step's spans go to (recording only during the traced step).
  profile::Timeline& timeline() { return timeline_; }
  // Before step `step` (0-based): starts recording (and profiling) when it is the chosen one.
  void begin(int64_t step);
  // After step `step`: collective over the world when it was the traced one (writes the file);
  // prints the op table on rank 0 when it was the profiled one.
  void end(int64_t step);

 private:
  bool traced(int64_t step) const { return !o_.timeline.empty() && step == o_.timeline_step; }
  bool profiled(int64_t step) const { return step == o_.profile_step; }

  const TrainOptions& o_;
  dist::ProcessGroup& world_;
  profile::Timeline timeline_;
  std::unique_ptr<profiler::Session> profile_;  // while the profiled step runs
};

}  // namespace strata::examples
