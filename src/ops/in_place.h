#pragma once
// The in-place ops that autograd records (compound assignment, Tensor::index_put_): an op
// writes self's memory, and when recorded, self's history becomes the op's node, whose
// input is self's history before the write (PyTorch rebases the same way).
#include <memory>

#include "strata/tensor/tensor.h"

namespace strata::detail {

// Throws unless autograd can record an in-place op on self: a leaf that requires grad is
// refused (PyTorch's rule), and so is self whose memory another tensor shares (a view, a
// base of views, a copy saved for a backward): those tensors' histories cannot be rewired.
void check_in_place_recordable(const char* op, const Tensor& self);

// A handle on self's memory that carries self's current autograd history (the recorded
// op's input); self keeps the history until adopt_history or clear_history.
Tensor history_handle(const Tensor& self);

// Self takes the history of `result`, a fresh output of a recorded op with self's shape.
void adopt_history(const Tensor& self, const Tensor& result);
// Self forgets its history, so autograd::record can make it an op's output.
void clear_history(const Tensor& self);

}  // namespace strata::detail
