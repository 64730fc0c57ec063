#pragma once
// The profiler's op spans (strata/profiler/profiler.h) on the step timeline, so Perfetto shows
// each op and backward node inside the forward/backward/optimizer spans it ran in:
//
//   timeline.start_recording();
//   profiler::Session session;
//   step();
//   profile::add_profiler_spans(timeline, session.spans());
//   timeline.write(world, "step.json");
#include <vector>

#include "strata/profile/timeline.h"
#include "strata/profiler/profiler.h"

namespace strata::profile {

// Adds each span as a complete event of category "op" with args "depth", "launches",
// "bytes_allocated" and, where it ran on CUDA, "device_ns". Like every span, kept only
// while the timeline records.
void add_profiler_spans(Timeline& timeline, const std::vector<profiler::Span>& spans);

}  // namespace strata::profile
