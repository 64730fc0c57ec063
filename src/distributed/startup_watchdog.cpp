#include "distributed/startup_watchdog.h"

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "distributed/launcher_env.h"

namespace strata::dist::detail {

struct StartupWatchState {
  std::mutex mu;
  std::condition_variable cv;
  bool disarmed = false;
  std::chrono::milliseconds timeout{0};
  LauncherView view;
  std::thread thread;
};

namespace {

// Guards the fields below: the engine's worker reports phases, the watchdog reads them.
std::mutex g_mu;
bool g_active = false;  // a watchdog is armed
StartupPhase g_phase = StartupPhase::MpiInit;
// Lives until finalize: a peer still starting may read this rank's entry.
std::unique_ptr<StartupBoard> g_board;

std::string describe_others(const LauncherView& v) {
  if (v.size == 1) return "this is the only rank";
  if (g_board) {
    const std::string peers = g_board->describe_peers();
    return peers.empty() ? "no other rank is on the startup board" : peers;
  }
  return "which other ranks did not arrive is unknown (no startup board: the launcher set no job id or rank, or "
         "the board's directory could not be made)";
}

// How late a watchdog may wake before it says that its own process was held up.
constexpr std::chrono::milliseconds kLateWake{1000};

[[noreturn]] void fire(const StartupWatchState& s, std::chrono::milliseconds late) {
  std::string msg;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    const LauncherView& v = s.view;
    const std::string rank = v.rank >= 0 ? std::to_string(v.rank) : "unknown";
    const std::string size = v.size > 0 ? std::to_string(v.size) : "unknown";
    msg = "[rank " + rank + "] startup: " + startup_phase_name(g_phase) + " timed out after " +
          std::to_string(s.timeout.count()) + " ms (the world's timeout) on rank " + rank + " of " + size + "; ";
    // A watchdog that wakes long after its deadline was not running: this process itself
    // was stopped (and resumed, e.g. by the launcher tearing the job down) or starved.
    if (late > kLateWake)
      msg += "this rank's watchdog ran " + std::to_string(late.count()) +
             " ms late (this process was stopped or "
             "not scheduled); ";
    msg += describe_others(v) +
           "; exiting with status 1 without MPI_Finalize (MPI cannot be finalised while it "
           "is starting)\n";
    // Peers that time out later read that this rank gave up, rather than that it exited.
    if (g_board) g_board->post(StartupPhase::TimedOut);
  }
  std::fputs(msg.c_str(), stderr);
  std::fflush(stderr);
  std::fflush(stdout);
  std::_Exit(1);
}

void watch(std::shared_ptr<StartupWatchState> s) {
  const auto deadline = std::chrono::steady_clock::now() + s->timeout;
  std::unique_lock<std::mutex> lk(s->mu);
  if (s->cv.wait_until(lk, deadline, [&] { return s->disarmed; })) return;
  lk.unlock();
  fire(*s, std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - deadline));
}

void disarm(StartupWatchState& s) {
  {
    std::lock_guard<std::mutex> lk(s.mu);
    s.disarmed = true;
  }
  s.cv.notify_all();
  if (s.thread.joinable()) s.thread.join();
}

}  // namespace

StartupWatchdog::StartupWatchdog(std::chrono::milliseconds timeout) : state_(std::make_shared<StartupWatchState>()) {
  state_->timeout = timeout;
  state_->view = launcher_view();
  {
    std::lock_guard<std::mutex> lk(g_mu);
    g_board = StartupBoard::open(state_->view);
    g_phase = StartupPhase::MpiInit;
    if (g_board) g_board->post(g_phase);
    g_active = true;
  }
  if (timeout.count() > 0) state_->thread = std::thread(watch, state_);
}

StartupWatchdog::~StartupWatchdog() {
  {
    std::lock_guard<std::mutex> lk(g_mu);
    g_active = false;
  }
  disarm(*state_);
}

void StartupWatchdog::done() {
  startup_reached(StartupPhase::Done);
  {
    std::lock_guard<std::mutex> lk(g_mu);
    g_active = false;
  }
  disarm(*state_);
}

void startup_reached(StartupPhase phase) {
  std::lock_guard<std::mutex> lk(g_mu);
  if (!g_active) return;
  g_phase = phase;
  if (g_board) g_board->post(phase);
}

void release_startup_board() {
  std::lock_guard<std::mutex> lk(g_mu);
  g_board.reset();
}

}  // namespace strata::dist::detail
