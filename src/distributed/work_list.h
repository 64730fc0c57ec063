#pragma once
// Work handles composed from others (no backend headers).
#include <functional>
#include <vector>

#include "strata/distributed/work.h"

namespace strata::dist::detail {

// Completes when every member has; waits on all members even when one throws, then
// rethrows the first failure.
class WorkList final : public Work {
 public:
  explicit WorkList(std::vector<WorkPtr> works) : works_(std::move(works)) {}
  bool is_completed() override {
    for (auto& w : works_)
      if (!w->is_completed()) return false;
    return true;
  }
  void wait() override {
    each([](Work& w) { w.wait(); });
  }
  void synchronize(std::chrono::milliseconds timeout) override {
    each([timeout](Work& w) { w.synchronize(timeout); });
  }
  void synchronize() override {
    each([](Work& w) { w.synchronize(); });
  }

 private:
  void each(const std::function<void(Work&)>& f) {
    std::exception_ptr first;
    for (auto& w : works_) {
      try {
        f(*w);
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
  }
  std::vector<WorkPtr> works_;
};

// A host-staged op (CUDA tensors through a CPU process group): `inner` runs on host copies,
// and `finish` (copying results back to the device) runs once, on the thread that first
// sees the op complete through this handle.
class StagedWork final : public Work {
 public:
  StagedWork(WorkPtr inner, std::function<void()> finish) : inner_(std::move(inner)), finish_(std::move(finish)) {}
  bool is_completed() override {
    if (!inner_->is_completed()) return false;
    inner_->wait();  // rethrows a failure
    run_finish();
    return true;
  }
  void wait() override {
    inner_->wait();
    run_finish();
  }
  void synchronize(std::chrono::milliseconds timeout) override {
    inner_->synchronize(timeout);
    run_finish();
  }
  void synchronize() override {
    inner_->synchronize();
    run_finish();
  }

 private:
  void run_finish() {
    if (!finish_) return;
    auto f = std::move(finish_);
    finish_ = nullptr;
    f();
  }
  WorkPtr inner_;
  std::function<void()> finish_;
};

}  // namespace strata::dist::detail
