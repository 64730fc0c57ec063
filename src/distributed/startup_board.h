#pragma once
// The startup board: how far each rank of a job has got through dist::init, kept where MPI
// is not needed to read it (MPI is what is starting). Each rank keeps one small file,
// <dir>/strata-startup-<uid>-<job>/rank-<R>, holding its phase, pid and host; <dir> is
// STRATA_STARTUP_BOARD_DIR, else /dev/shm (node-local: peers on other nodes are not seen
// unless that variable names a shared directory). When startup times out, the watchdog
// (startup_watchdog.h) reads it to name the ranks that did not arrive, and on this node
// tells a stopped or exited process from one that is waiting like this one (/proc).
#include <memory>
#include <string>

#include "distributed/launcher_env.h"

namespace strata::dist::detail {

// TimedOut: this rank's watchdog gave up (posted just before it ends the process).
enum class StartupPhase { MpiInit, WorldSetup, Done, TimedOut };

// "MPI initialisation", "world group setup"
const char* startup_phase_name(StartupPhase phase);

class StartupBoard {
 public:
  // Null when the launcher names no job or rank (nobody to tell) or the directory cannot be
  // made. Removes the boards of earlier jobs on this host whose processes have all ended.
  static std::unique_ptr<StartupBoard> open(const LauncherView& view);
  ~StartupBoard();
  StartupBoard(const StartupBoard&) = delete;
  StartupBoard& operator=(const StartupBoard&) = delete;

  // Records this rank's phase (best effort: a failed write only makes a report vaguer).
  void post(StartupPhase phase);
  // What the board says about every other rank, as clauses for a message: "rank 1 is stopped
  // (pid 4242: SIGSTOP or a debugger) in MPI initialisation; ranks 2, 3 had not reached
  // startup (...)". Ranks are grouped by what became of them, culprits first.
  std::string describe_peers() const;
  const std::string& directory() const { return dir_; }

 private:
  StartupBoard(LauncherView view, std::string dir, std::string host);
  std::string path_of(int rank) const;

  LauncherView view_;
  std::string dir_;
  std::string host_;
  bool posted_ = false;
};

}  // namespace strata::dist::detail
