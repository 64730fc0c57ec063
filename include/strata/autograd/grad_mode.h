#pragma once

namespace strata {

// Whether ops record autograd history on this thread (on by default).
bool grad_enabled();
void set_grad_enabled(bool enabled);

// Disables recording for its lifetime (optimizer steps, evaluation).
class NoGradGuard {
 public:
  NoGradGuard() : previous_(grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace strata
