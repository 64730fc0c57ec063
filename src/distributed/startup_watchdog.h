#pragma once
// Startup under the world's timeout. MPI initialisation and the world group's setup are
// blocking collectives over every rank: a rank that never arrives (stopped, hung before
// dist::init, dead) would leave the others inside them for good, and no op's deadline
// covers them. The watchdog is a thread armed before MPI starts; if startup has not
// finished within the timeout it prints which step of startup it was in, this rank, the
// world size and what the startup board (startup_board.h) says about the other ranks, and
// ends the process with status 1 (std::_Exit: MPI cannot be finalised while it starts).
#include <chrono>
#include <memory>

#include "distributed/startup_board.h"

namespace strata::dist::detail {

struct StartupWatchState;  // startup_watchdog.cpp

class StartupWatchdog {
 public:
  // Arms it (a timeout of 0 or less never fires) and posts MpiInit on the board.
  explicit StartupWatchdog(std::chrono::milliseconds timeout);
  // Disarms it (startup failed with an exception, or finished: see done()).
  ~StartupWatchdog();
  StartupWatchdog(const StartupWatchdog&) = delete;
  StartupWatchdog& operator=(const StartupWatchdog&) = delete;
  // Startup finished: posts Done and disarms. The board entry stays until finalize (a peer
  // still starting may read it), see release_startup_board().
  void done();

 private:
  std::shared_ptr<StartupWatchState> state_;
};

// The step startup has reached on this rank (the MPI engine calls it after MPI_Init);
// nothing when no watchdog is armed.
void startup_reached(StartupPhase phase);

// Removes this rank's board entry (dist::finalize).
void release_startup_board();

}  // namespace strata::dist::detail
