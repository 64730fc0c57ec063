#include "backend/dispatch/accumulate.h"

#include "backend/cpu/elementwise.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/dispatch/device_dispatch.h"
#include "strata/core/error.h"

namespace strata::backend {
namespace {

Device check_same(const Tensor& a, const Tensor& b, const char* what) {
  STRATA_CHECK(a.defined() && b.defined(), what, ": a gradient is undefined");
  STRATA_CHECK(a.shape() == b.shape() && a.dtype() == b.dtype(), what, ": a ", b.dtype(), " gradient of shape ",
               b.shape(), " cannot be added to a ", a.dtype(), " gradient of shape ", a.shape());
  return detail::common_device(what, {{"gradient", a}, {"addend", b}});
}

}  // namespace

Tensor add_same_shape(const Tensor& a, const Tensor& b, const char* what) {
  const Device device = check_same(a, b, what);
  return detail::on_device(
      what, device, [&] { return cpu::binary(BinaryOp::Add, a, b, what); },
      [&] { return cuda_ops::binary(BinaryOp::Add, a, b, what); });
}

void add_into(const Tensor& dst, const Tensor& src, const char* what) {
  const Device device = check_same(dst, src, what);
  detail::on_device(
      what, device, [&] { cpu::add_inplace(dst, src, 1.0); }, [&] { cuda_ops::add_inplace(dst, src, 1.0); });
}

}  // namespace strata::backend
