#pragma once
// Communicator life cycle helpers shared by bootstrap.cpp and process_group_nccl.cpp
// (private: includes nccl.h). strata's communicators are non-blocking (ncclConfig_t
// blocking = 0): creation, splits, enqueues and teardown return at once with
// ncclInProgress, and await_comm polls them against a deadline, so a peer that never
// arrives ends in an error naming the step instead of a call that never returns.
#include <nccl.h>

#include <chrono>
#include <mutex>
#include <string>

namespace strata::dist::nccl {

using Clock = std::chrono::steady_clock;

// Throws strata::Error naming the NCCL call, its result and NCCL's last error text.
// ncclInProgress is not an error: a non-blocking communicator is still working (await_comm).
#define STRATA_NCCL(call)                                                                                         \
  do {                                                                                                            \
    ncclResult_t strata_nccl_rc_ = (call);                                                                        \
    if (strata_nccl_rc_ != ncclSuccess && strata_nccl_rc_ != ncclInProgress) [[unlikely]]                         \
      STRATA_FAIL(#call, " failed: ", ncclGetErrorString(strata_nccl_rc_), " (", ncclGetLastError(nullptr), ")"); \
  } while (0)

// A configuration for non-blocking communicators.
ncclConfig_t nonblocking_config();

// Waits until `comm` has finished its pending non-blocking work. Throws naming `what` when
// NCCL reports an error, or when `deadline` passes (the caller then aborts the communicator).
void await_comm(ncclComm_t comm, Clock::time_point deadline, const std::string& what);

// One lock per device, held while a thread enqueues NCCL work there and while a
// communicator on it is aborted. Two groups on one device (data and tensor parallel) used
// from two threads must not interleave their kernels in a different order on different
// ranks, which a lock per group would allow (a cross-group deadlock).
std::timed_mutex& device_enqueue_mutex(int device);

// What a fatal group failure does beyond failing the group's ops: "poison" (default: the
// device is refused from then on, cuda_detail::poison_device) or, with
// STRATA_NCCL_FATAL=abort, print the reason and abort the process (what a supervisor such
// as strata-run restarts from the last checkpoint).
bool abort_on_fatal();

}  // namespace strata::dist::nccl
