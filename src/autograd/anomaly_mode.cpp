#include "strata/autograd/anomaly_mode.h"

#include "autograd/anomaly_check.h"
#include "backend/dispatch/non_finite.h"

namespace strata::autograd {
namespace {

thread_local bool t_detect_anomaly = false;

// `t` (output or input `index` of `op`) must hold no nan or inf (-inf only where
// `negative_inf`); `what` says which pass.
void check_finite(const Tensor& t, std::string_view op, const char* what, size_t index, bool negative_inf) {
  if (!t.defined()) return;
  const backend::NonFiniteCount c = backend::count_non_finite(t, negative_inf);
  if (!c.any()) return;
  STRATA_FAIL("anomaly detected (autograd::DetectAnomaly): ", what, " ", index, " of ", op, " holds ", c.nan,
              " nan and ", c.inf, negative_inf ? " inf" : " +inf", " of its ", t.numel(), " elements (", t.dtype(), " ",
              t.shape(), " on ", t.device(), "; the first at element ", c.first, ")");
}

}  // namespace

bool anomaly_mode_enabled() { return t_detect_anomaly; }
void set_detect_anomaly(bool enabled) { t_detect_anomaly = enabled; }

void check_forward_outputs(std::string_view op, const std::vector<Tensor>& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i)
    check_finite(outputs[i], op, "in forward, output", i, /*negative_inf=*/false);
}

void check_backward_outputs(std::string_view op, const std::vector<Tensor>& input_grads) {
  for (size_t i = 0; i < input_grads.size(); ++i)
    check_finite(input_grads[i], op, "in backward, the gradient for input", i, /*negative_inf=*/true);
}

}  // namespace strata::autograd
