#include "distributed/nccl/nccl_comm.h"

#include <array>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "strata/core/error.h"

namespace strata::dist::nccl {

ncclConfig_t nonblocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

void await_comm(ncclComm_t comm, Clock::time_point deadline, const std::string& what) {
  for (auto pause = std::chrono::microseconds(5);; pause = std::min(pause * 2, std::chrono::microseconds(1000))) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t rc = ncclCommGetAsyncError(comm, &state);
    if (rc != ncclSuccess) STRATA_FAIL(what, ": ncclCommGetAsyncError failed: ", ncclGetErrorString(rc));
    if (state == ncclSuccess) return;
    if (state != ncclInProgress)
      STRATA_FAIL(what, " failed: ", ncclGetErrorString(state), " (", ncclGetLastError(comm), ")");
    if (Clock::now() >= deadline) STRATA_FAIL(what, " did not complete before the group's timeout");
    std::this_thread::sleep_for(pause);
  }
}

std::timed_mutex& device_enqueue_mutex(int device) {
  static std::array<std::timed_mutex, 64> mutexes;
  STRATA_CHECK(device >= 0 && static_cast<size_t>(device) < mutexes.size(), "nccl: device index ", device,
               " is out of range (at most ", mutexes.size(), " devices)");
  return mutexes[static_cast<size_t>(device)];
}

bool abort_on_fatal() {
  static const bool abort = [] {
    const char* v = std::getenv("STRATA_NCCL_FATAL");
    if (v == nullptr || *v == '\0' || std::strcmp(v, "poison") == 0) return false;
    STRATA_CHECK(std::strcmp(v, "abort") == 0, "STRATA_NCCL_FATAL=", v, " is not understood (poison or abort)");
    return true;
  }();
  return abort;
}

}  // namespace strata::dist::nccl
