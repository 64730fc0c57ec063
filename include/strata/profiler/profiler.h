#pragma once
// An op-level profiler, as torch.profiler is to PyTorch: while a Session records, every op
// (each call through the device dispatch, named as its errors name it) and every backward
// node ("LinearBackward") is a span with its host time, on CUDA its device time (a pair of
// events on the device's stream), the kernels it launched and the tensor bytes it allocated.
//
//   {
//     profiler::Session session;            // starts recording (one session at a time)
//     model_step();
//     session.stop();
//     std::puts(session.table().c_str());   // sorted by device time, then host time
//   }
//
// Off by default: with no session, a Scope costs one relaxed atomic load (no clock read, no
// allocation). Ops inside ops count in their own row and as children: "host self" is a
// row's host time less its children's, as torch's self CPU time. Device times are resolved
// when first asked for (rows(), table()), with one wait for the device, never during the
// step. A session destroyed before anyone read its results, or still recording at exit,
// prints its table to stderr with a warning rather than losing it.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "strata/core/device.h"

namespace strata::profiler {

// One name's totals over the session (times in milliseconds; launches and bytes include
// the children's, as the device time does).
struct Row {
  std::string name;
  int64_t calls = 0;
  double host_total_ms = 0;
  double host_self_ms = 0;
  double device_ms = 0;          // 0 when has_device_time is false
  bool has_device_time = false;  // some call ran on CUDA and its events resolved
  int64_t launches = 0;          // CUDA kernel launches (kernel C API, cuBLASLt, cuDNN calls)
  int64_t bytes_allocated = 0;   // tensor storage handed out by the CPU and CUDA allocators
};

// One recorded call, for timelines: host wall-clock (system_clock) nanoseconds.
struct Span {
  std::string name;
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  int depth = 0;           // 0: outermost recorded span on its thread
  int64_t device_ns = -1;  // -1: no device time
  int64_t launches = 0;
  int64_t bytes_allocated = 0;
};

namespace detail {
struct SessionState;
// True while a session records; Scope's one check when off.
extern std::atomic<bool> g_recording;
void count_launch_slow();
void count_allocation_slow(size_t nbytes);
}  // namespace detail

// True while a session records.
inline bool recording() { return detail::g_recording.load(std::memory_order_relaxed); }

// Counted by the CUDA backend at each kernel launch and by the allocators at each
// allocation; nothing but the check when no session records.
inline void count_launch() {
  if (recording()) [[unlikely]]
    detail::count_launch_slow();
}
inline void count_allocation(size_t nbytes) {
  if (recording()) [[unlikely]]
    detail::count_allocation_slow(nbytes);
}

class Session {
 public:
  // Starts recording; throws strata::Error when another session is already recording.
  Session();
  // Stops; prints a warning and the table to stderr when its results were never read.
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void stop();  // stops recording (idempotent); spans still open then are not recorded
  bool is_recording() const;

  // Per-name totals, sorted by device time, then host time (descending). Stops first.
  std::vector<Row> rows();
  // rows() as a fixed-width text table with a header naming the columns.
  std::string table();
  // Every recorded call in the order they ended (device times resolved). Stops first.
  std::vector<Span> spans();

 private:
  std::shared_ptr<detail::SessionState> state_;
};

// Marks one op or user region on this thread; `device` is where its kernels run (a CUDA
// device gets events). Scopes nest by construction.
class Scope {
 public:
  explicit Scope(std::string_view name, Device device = Device::cpu()) {
    if (recording()) [[unlikely]]
      begin(name, device);
  }
  ~Scope() {
    if (open_) [[unlikely]]
      end();
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  void begin(std::string_view name, Device device);
  void end() noexcept;
  bool open_ = false;
};

}  // namespace strata::profiler
