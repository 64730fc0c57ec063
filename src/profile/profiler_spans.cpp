#include "strata/profile/profiler_spans.h"

namespace strata::profile {

void add_profiler_spans(Timeline& timeline, const std::vector<profiler::Span>& spans) {
  for (const profiler::Span& s : spans) {
    Timeline::Args args{{"depth", s.depth}, {"launches", s.launches}, {"bytes_allocated", s.bytes_allocated}};
    if (s.device_ns >= 0) args.emplace_back("device_ns", s.device_ns);
    timeline.add(
        {.name = s.name, .category = "op", .begin_ns = s.begin_ns, .end_ns = s.end_ns, .args = std::move(args)});
  }
}

}  // namespace strata::profile
