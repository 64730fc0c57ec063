// Compound assignment (+=, -=, *=, /=) and the history rewiring shared with index_put_
// (ops/in_place.h).
#include "ops/in_place.h"

#include <optional>

#include "strata/autograd/function.h"
#include "strata/autograd/grad_mode.h"
#include "strata/autograd/node.h"
#include "strata/ops/elementwise.h"
#include "strata/tensor/factory.h"
#include "tensor/device_copy.h"

namespace strata {
namespace detail {

void check_in_place_recordable(const char* op, const Tensor& self) {
  STRATA_CHECK(!(self.is_leaf() && self.requires_grad()), op, ": a leaf tensor that requires grad (shape ",
               self.shape(), ") is being used in an in-place operation; update it under NoGradGuard, or clone() it");
  // Every tensor viewing this memory holds the Storage: only self may, or another tensor's
  // values would change behind its autograd history.
  STRATA_CHECK(self.storage().use_count() == 1, op, ": in-place operation that autograd must record on a tensor (",
               self.dtype(), " ", self.shape(),
               ") whose memory another tensor shares (a view of it or of its base, or a copy saved for a backward "
               "pass); strata cannot rewrite the other tensors' histories: clone() it first, or write it under "
               "NoGradGuard");
}

Tensor history_handle(const Tensor& self) { return Tensor(std::make_shared<TensorImpl>(*self.impl())); }

void adopt_history(const Tensor& self, const Tensor& result) { self.impl()->autograd = result.impl()->autograd; }

void clear_history(const Tensor& self) { self.impl()->autograd.reset(); }

}  // namespace detail

namespace {

// self = fn(self, other) in self's memory (other is undefined for a scalar operand, which fn
// holds). Recorded: fn runs on a handle carrying self's old history (a clone when fn's
// backward reads self, which the write is about to change), and self adopts the result's
// history.
template <class Fn>
Tensor& assign_in_place(const char* op, Tensor& self, const Tensor& other, Fn fn, bool backward_reads_self) {
  STRATA_CHECK(self.defined(), op, ": the tensor assigned to is undefined");
  const bool record = autograd::needs_grad({self, other});
  if (record) detail::check_in_place_recordable(op, self);
  Tensor result;
  if (record) {
    Tensor before = detail::history_handle(self);
    if (backward_reads_self) before = before.clone();
    result = fn(before, other.is_same(self) ? before : other);
  } else {
    NoGradGuard no_grad;
    result = fn(self.detach(), other.defined() ? other.detach() : other);
  }
  STRATA_CHECK(result.shape() == self.shape(), op, ": operand of shape ", other.defined() ? other.shape() : Shape{},
               " broadcasts the result to shape ", result.shape(), ", but the tensor assigned to has shape ",
               self.shape(), " (an in-place op cannot change its shape)");
  STRATA_CHECK(result.dtype() == self.dtype(), op, ": result dtype ", result.dtype(), " differs from the tensor's ",
               self.dtype());
  detail::copy_any(self, result);
  self.bump_version();
  if (record) detail::adopt_history(self, result);
  return self;
}

Tensor scalar_like(double value, const Tensor& like) {
  STRATA_CHECK(like.defined(), "scalar arithmetic on an undefined tensor");
  return scalar_tensor(value, {.dtype = like.dtype(), .device = like.device()});
}

// The tensor operand's op; add, sub, mul and div check it (defined, dtype, device, shape).
template <Tensor (*Op)(const Tensor&, const Tensor&)>
Tensor& assign_tensor(const char* op, Tensor& self, const Tensor& other, bool backward_reads_self) {
  return assign_in_place(
      op, self, other, [](const Tensor& a, const Tensor& b) { return Op(a, b); }, backward_reads_self);
}

}  // namespace

Tensor operator-(double a, const Tensor& b) { return sub(scalar_like(a, b), b); }
Tensor operator/(double a, const Tensor& b) { return div(scalar_like(a, b), b); }

// mul and div read both operands in backward, and self is about to change.
Tensor& operator+=(Tensor& self, const Tensor& other) { return assign_tensor<add>("add_", self, other, false); }
Tensor& operator-=(Tensor& self, const Tensor& other) { return assign_tensor<sub>("sub_", self, other, false); }
Tensor& operator*=(Tensor& self, const Tensor& other) { return assign_tensor<mul>("mul_", self, other, true); }
Tensor& operator/=(Tensor& self, const Tensor& other) { return assign_tensor<div>("div_", self, other, true); }

Tensor& operator+=(Tensor& self, double other) {
  return assign_in_place(
      "add_", self, Tensor(), [other](const Tensor& a, const Tensor&) { return add(a, other); }, false);
}
Tensor& operator-=(Tensor& self, double other) {
  return assign_in_place(
      "sub_", self, Tensor(), [other](const Tensor& a, const Tensor&) { return add(a, -other); }, false);
}
Tensor& operator*=(Tensor& self, double other) {
  return assign_in_place(
      "mul_", self, Tensor(), [other](const Tensor& a, const Tensor&) { return mul(a, other); }, false);
}
// True division (not a multiply by 1/other, which rounds twice); div's backward reads self.
Tensor& operator/=(Tensor& self, double other) {
  return assign_in_place(
      "div_", self, Tensor(), [other](const Tensor& a, const Tensor&) { return div(a, scalar_like(other, a)); }, true);
}

}  // namespace strata
