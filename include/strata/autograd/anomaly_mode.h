#pragma once
// Anomaly detection (torch.autograd.detect_anomaly / set_detect_anomaly): while it is on,
// every op that records autograd history has its forward outputs checked for nan and +inf
// (-inf is allowed there: attention masks add it on purpose), and every backward node the
// gradients it returns for nan and +-inf; the first such value throws
// strata::Error naming the op (the node's name, e.g. "MulBackward", or a custom Function's
// type), forward or backward, the output or input index, its shape, and how many elements
// are nan and inf. Off by default: then the cost is one thread-local flag test per op and per
// backward node. On, each checked tensor costs one pass over it (on a GPU a reduction and an
// 8-byte copy to the host), so use it to find where a nan starts, not for training runs.
//
//   {
//     autograd::DetectAnomaly anomaly;
//     Tensor loss = model.loss(x, y);   // throws at the first op whose output is nan/inf
//     loss.backward();                  // throws at the first node returning a nan/inf gradient
//   }
//
// Ops that record no history (grad mode off, or no input requires grad) are not checked.
// The flag is per thread, like grad mode; backward runs on the calling thread.

namespace strata::autograd {

bool anomaly_mode_enabled();
void set_detect_anomaly(bool enabled);

// Turns anomaly detection on (or off, with `enabled` false) for its lifetime.
class DetectAnomaly {
 public:
  explicit DetectAnomaly(bool enabled = true) : previous_(anomaly_mode_enabled()) { set_detect_anomaly(enabled); }
  ~DetectAnomaly() { set_detect_anomaly(previous_); }
  DetectAnomaly(const DetectAnomaly&) = delete;
  DetectAnomaly& operator=(const DetectAnomaly&) = delete;

 private:
  bool previous_;
};

}  // namespace strata::autograd
