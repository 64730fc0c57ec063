#pragma once
// The profiler's seam to the device: declared here, defined in backend/cuda/profiler_events.cpp
// (the CUDA build) or backend/cuda/absent.cpp (without CUDA: no events, so no device time).
// The functions never throw: a profiler must not break the step it measures, so a failure
// reads as "no device time" for that span.
namespace strata::profiler::detail {

// A timing event recorded now on `device`'s current stream; null when none could be made.
void* record_device_event(int device) noexcept;
// Milliseconds between two events from record_device_event (waits for `end` to complete);
// negative when either is null or the device reports an error.
float device_elapsed_ms(void* begin, void* end) noexcept;
void destroy_device_event(void* event) noexcept;

}  // namespace strata::profiler::detail
