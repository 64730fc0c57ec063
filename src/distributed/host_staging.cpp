#include "distributed/host_staging.h"

#include <memory>

#include "distributed/work_list.h"
#include "strata/tensor/factory.h"
#include "tensor/device_copy.h"

namespace strata::dist::detail {
namespace {

bool staged(bool active, const Tensor& t) { return active && t.defined() && t.device().is_cuda(); }

// A host copy of t's values.
Tensor host_copy(const Tensor& t) { return t.detach().to(Device::cpu()); }

}  // namespace

Tensor HostStage::input(const Tensor& t) const { return staged(active_, t) ? host_copy(t) : t; }

Tensor HostStage::in_out(const Tensor& t) {
  if (!staged(active_, t)) return t;
  Tensor host = host_copy(t);
  back_.emplace_back(t, host);
  return host;
}

Tensor HostStage::output(const Tensor& t) {
  if (!staged(active_, t)) return t;
  Tensor host = empty(t.shape(), {.dtype = t.dtype()});
  back_.emplace_back(t, host);
  return host;
}

WorkPtr HostStage::finish(WorkPtr inner) {
  if (back_.empty()) return inner;
  return std::make_unique<StagedWork>(std::move(inner), [back = std::move(back_)]() mutable {
    // As the collective writes a host tensor's memory in place, not as a user's copy_: the
    // version is left alone (ZeRO-3 regathers parameters that backward has saved).
    for (auto& [device, host] : back) strata::detail::copy_any(device, host);
  });
}

}  // namespace strata::dist::detail
