#pragma once
#include <chrono>
#include <memory>

namespace strata::dist {

// A handle to an asynchronous collective or point-to-point op.
class Work {
 public:
  virtual ~Work() = default;
  // True once the op has finished on this rank (non-blocking).
  virtual bool is_completed() = 0;
  // Makes later work on the caller's stream wait for the op. For CPU (MPI) work this blocks
  // until the op completes; for CUDA (NCCL) work it orders the current stream after the
  // op's stream without blocking the host. Rethrows an op failure (e.g. a timeout).
  virtual void wait() = 0;
  // Blocks the host until the op completes or `timeout` expires; on expiry throws
  // strata::Error naming the op, its sequence number, the group and the ranks that have
  // not reached it. The op itself stays pending (only the group's own timeout, enforced by
  // the backend's watchdog, fails it and makes the group unusable).
  virtual void synchronize(std::chrono::milliseconds timeout) = 0;
  // Blocks with the group's own timeout.
  virtual void synchronize() = 0;
};

using WorkPtr = std::unique_ptr<Work>;

}  // namespace strata::dist
