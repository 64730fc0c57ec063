#pragma once
// What every dataset in strata/data hands to a training loop.
#include <cstdint>

#include "strata/tensor/tensor.h"

namespace strata::data {

// Targets equal to this are skipped by cross_entropy and by accuracy metrics (the default
// ignore_index of strata::cross_entropy, as in PyTorch).
inline constexpr int64_t kIgnoreIndex = -100;

// One batch for next-token prediction: inputs[b, t] is fed to the model, targets[b, t] is
// the token it should predict at that position (or kIgnoreIndex). Both int64 [B, T] on CPU.
struct Batch {
  Tensor inputs;
  Tensor targets;
};

}  // namespace strata::data
