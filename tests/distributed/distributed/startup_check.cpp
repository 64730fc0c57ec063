// For tests/faults/startup_stall.sh: dist::init under the timeout given in milliseconds
// (argument 1), then one barrier of the world. Prints "STARTUP_OK rank R of N" once both
// completed; any error is printed and ends the process with status 1.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "strata/distributed/init.h"

int main(int argc, char** argv) {
  const long ms = argc > 1 ? std::atol(argv[1]) : 0;
  if (ms <= 0) {
    std::fprintf(stderr, "usage: startup_check TIMEOUT_MS\n");
    return 2;
  }
  try {
    auto& world = strata::dist::init({.timeout = std::chrono::milliseconds(ms)});
    world.barrier()->wait();
    std::printf("STARTUP_OK rank %d of %d\n", world.rank(), world.size());
    std::fflush(stdout);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "startup_check: %s\n", e.what());
    std::fflush(stderr);
    std::_Exit(1);  // MPI_Finalize would wait for the rank that never came
  }
  return 0;
}
