// Sessions and scopes: a process-wide current session, a per-thread stack of open scopes
// (nesting, self time), per-thread launch and allocation counters read at a scope's ends.
#include "strata/profiler/profiler.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "profiler/device_events.h"
#include "profiler/session_state.h"
#include "strata/core/error.h"

namespace strata::profiler {
namespace detail {

std::atomic<bool> g_recording{false};

namespace {

std::mutex g_current_mutex;  // guards g_current
std::shared_ptr<SessionState> g_current;

// A scope that began while a session recorded, until it ends.
struct OpenScope {
  std::shared_ptr<SessionState> state;
  std::string name;
  int device = -1;       // CUDA ordinal, -1 on the CPU
  int64_t begin_ns = 0;  // steady clock
  int64_t children_ns = 0;
  int64_t launches_at_begin = 0;
  int64_t bytes_at_begin = 0;
  void* event_begin = nullptr;
};

thread_local std::vector<OpenScope> t_open;
thread_local int64_t t_launches = 0;
thread_local int64_t t_bytes = 0;

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t system_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A session still recording when the process exits (leaked, or exit() skipped its
// destructor) prints its host-time table rather than vanish; the CUDA runtime may already
// be shutting down, so device times are not resolved then.
void report_open_session_at_exit() {
  std::shared_ptr<SessionState> state;
  {
    std::lock_guard lock(g_current_mutex);
    state = g_current;
  }
  if (!state) return;
  std::lock_guard lock(state->mutex);
  state->recording = false;
  state->results_read = true;
  std::fprintf(stderr,
               "strata::profiler: a session was still recording at exit (stop it and read table() before "
               "exiting); its table, host times only:\n%s",
               format_table(sum_by_name(*state)).c_str());
}

std::shared_ptr<SessionState> current_session() {
  std::lock_guard lock(g_current_mutex);
  return g_current;
}

}  // namespace

void count_launch_slow() { ++t_launches; }
void count_allocation_slow(size_t nbytes) { t_bytes += static_cast<int64_t>(nbytes); }

SessionState::~SessionState() {
  for (Record& r : records) {
    destroy_device_event(r.event_begin);
    destroy_device_event(r.event_end);
  }
}

}  // namespace detail

Session::Session() : state_(std::make_shared<detail::SessionState>()) {
  static const bool registered = std::atexit(detail::report_open_session_at_exit) == 0;
  (void)registered;
  state_->steady_origin_ns = detail::steady_ns();
  state_->system_origin_ns = detail::system_ns();
  std::lock_guard lock(detail::g_current_mutex);
  if (detail::g_current) {
    const double ms = static_cast<double>(detail::steady_ns() - detail::g_current->steady_origin_ns) / 1e6;
    STRATA_FAIL("profiler::Session: another session is already recording (started ", ms,
                " ms ago); stop it (Session::stop() or its destructor) before starting a new one");
  }
  detail::g_current = state_;
  detail::g_recording.store(true, std::memory_order_relaxed);
}

Session::~Session() {
  stop();
  std::lock_guard lock(state_->mutex);
  if (state_->results_read) return;
  state_->results_read = true;
  detail::resolve_device_times(*state_);
  std::fprintf(stderr,
               "strata::profiler: a session ended without its results being read (rows(), table() or spans()); "
               "its table:\n%s",
               detail::format_table(detail::sum_by_name(*state_)).c_str());
}

void Session::stop() {
  {
    std::lock_guard lock(detail::g_current_mutex);
    if (detail::g_current == state_) {
      detail::g_current.reset();
      detail::g_recording.store(false, std::memory_order_relaxed);
    }
  }
  std::lock_guard lock(state_->mutex);
  state_->recording = false;
}

bool Session::is_recording() const {
  std::lock_guard lock(state_->mutex);
  return state_->recording;
}

std::vector<Row> Session::rows() {
  stop();
  std::lock_guard lock(state_->mutex);
  state_->results_read = true;
  detail::resolve_device_times(*state_);
  return detail::sum_by_name(*state_);
}

std::string Session::table() { return detail::format_table(rows()); }

std::vector<Span> Session::spans() {
  stop();
  std::lock_guard lock(state_->mutex);
  state_->results_read = true;
  detail::resolve_device_times(*state_);
  std::vector<Span> out;
  out.reserve(state_->records.size());
  for (const detail::Record& r : state_->records) {
    const int64_t device_ns = r.device_ms < 0 ? -1 : static_cast<int64_t>(static_cast<double>(r.device_ms) * 1e6);
    out.push_back({r.name, r.begin_ns, r.end_ns, r.depth, device_ns, r.launches, r.bytes});
  }
  return out;
}

void Scope::begin(std::string_view name, Device device) {
  std::shared_ptr<detail::SessionState> state = detail::current_session();
  if (!state) return;  // the session stopped since recording() was read
  detail::OpenScope open{.state = std::move(state),
                         .name = std::string(name),
                         .device = device.is_cuda() ? device.index : -1,
                         .launches_at_begin = detail::t_launches,
                         .bytes_at_begin = detail::t_bytes};
  if (open.device >= 0) open.event_begin = detail::record_device_event(open.device);
  open.begin_ns = detail::steady_ns();  // last: the host time excludes the profiler's own setup
  detail::t_open.push_back(std::move(open));
  open_ = true;
}

void Scope::end() noexcept {
  const int64_t end_ns = detail::steady_ns();
  detail::OpenScope open = std::move(detail::t_open.back());
  detail::t_open.pop_back();
  const int64_t host_ns = end_ns - open.begin_ns;
  if (!detail::t_open.empty() && detail::t_open.back().state == open.state)
    detail::t_open.back().children_ns += host_ns;
  void* event_end = open.event_begin ? detail::record_device_event(open.device) : nullptr;
  detail::SessionState& s = *open.state;
  const int64_t to_system = s.system_origin_ns - s.steady_origin_ns;
  std::lock_guard lock(s.mutex);
  bool kept = false;
  if (s.recording) {  // else dropped: the session stopped while this scope was open
    try {
      s.records.push_back({.name = std::move(open.name),
                           .begin_ns = open.begin_ns + to_system,
                           .end_ns = end_ns + to_system,
                           .self_ns = host_ns - open.children_ns,
                           .depth = static_cast<int>(detail::t_open.size()),
                           .launches = detail::t_launches - open.launches_at_begin,
                           .bytes = detail::t_bytes - open.bytes_at_begin,
                           .event_begin = open.event_begin,
                           .event_end = event_end});
      kept = true;
    } catch (...) {  // out of memory: this span is lost, the step goes on
    }
  }
  if (!kept) {
    detail::destroy_device_event(open.event_begin);
    detail::destroy_device_event(event_end);
  }
}

}  // namespace strata::profiler
