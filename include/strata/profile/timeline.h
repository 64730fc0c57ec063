#pragma once
// A timeline of training steps as a Chrome trace (the JSON format Perfetto and
// chrome://tracing open): per rank, named spans (forward, backward, send, recv, collectives,
// optimizer, the step) nested by time. Recording is off until start_recording(), so a
// training loop passes the same Timeline everywhere and turns it on for the step it wants:
//
//   profile::Timeline timeline;
//   if (step == chosen) timeline.start_recording();
//   { auto s = timeline.span("step", "step", {{"step", step}}); ... }
//   if (step == chosen) { timeline.stop_recording(); timeline.write(world, "step.json"); }
//
// Times are wall-clock (system_clock) nanoseconds, so ranks on one host share a clock exactly
// and ranks on different hosts differ by their clocks' offset (NTP: typically well under a
// millisecond). Spans opened on one thread nest by construction (RAII). A Timeline is not
// synchronized: record into it from one thread (the one that runs the step).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "strata/distributed/process_group.h"

namespace strata::profile {

class Timeline {
 public:
  // Small integer arguments shown with a span in Perfetto: {"micro_batch", 3}, {"bytes", 4096}.
  using Args = std::vector<std::pair<std::string, int64_t>>;

  struct Event {
    std::string name;      // "forward"
    std::string category;  // "compute", "comm", "optimizer", "step"
    int64_t begin_ns = 0;  // system_clock, nanoseconds since the epoch
    int64_t end_ns = 0;
    Args args;
  };

  // Records [construction, end() or destruction) into the timeline when it was recording at
  // construction (even if recording has stopped since); otherwise (or for a null timeline)
  // does nothing and allocates nothing beyond the strings and args it was given. Moving
  // transfers the pending record; a moved-from Span records nothing.
  class Span {
   public:
    Span() = default;
    Span(Span&& other) noexcept;
    Span& operator=(Span&& other) noexcept;
    Span(const Span&) = delete;
    Span& operator=(const Span&) = delete;
    ~Span();
    void end();  // records now instead of at destruction (once)

   private:
    friend class Timeline;
    Timeline* timeline_ = nullptr;
    Event event_;
  };

  void start_recording();  // drops the events recorded so far and records from now on
  void stop_recording();
  bool recording() const { return recording_; }

  [[nodiscard]] Span span(std::string name, std::string category, Args args = {});
  // The same through a pointer that may be null (an option nobody set).
  [[nodiscard]] static Span span(Timeline* timeline, std::string name, std::string category, Args args = {});
  // A span measured elsewhere (begin and end in system_clock nanoseconds); kept when recording.
  void add(Event event);

  const std::vector<Event>& events() const { return events_; }

  // Collective over `group`: every rank sends its events to group rank 0, which writes one
  // Chrome-trace JSON file at `path` (atomically, replacing it): a process per rank named
  // "rank <global rank>", complete ("X") events with microsecond timestamps counted from the
  // earliest event of any rank. The other ranks write nothing. Throws strata::Error naming
  // the path when it cannot be written (on rank 0; the others return normally). Spans still
  // open are not included. The events travel as CPU tensors, so `group` must take those (an
  // MPI or local group, not NCCL).
  void write(dist::ProcessGroup& group, const std::string& path) const;
  // This rank's events alone, as the same JSON (pid = `rank`), for single-process runs.
  std::string to_json(int rank) const;

 private:
  bool recording_ = false;
  std::vector<Event> events_;
};

}  // namespace strata::profile
