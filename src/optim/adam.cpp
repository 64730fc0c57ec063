#include "strata/optim/adam.h"

#include <cmath>

#include "common/adam.h"
#include "../tensor/cpu/multiversion.h"
#include "../tensor/cpu/dtype_dispatch.h"
#include "state_reader.h"
#include "strata/autograd/grad_mode.h"
#include "strata/tensor/factory.h"

namespace strata::optim {
namespace {

constexpr int64_t kParallelThreshold = 32768;

std::vector<ParamGroup> single_group(std::vector<Tensor> params, double lr, double weight_decay) {
  std::vector<ParamGroup> groups(1);
  groups[0].params = std::move(params);
  groups[0].lr = lr;
  groups[0].weight_decay = weight_decay;
  return groups;
}

AdamOptions to_adam(const AdamWOptions& o) {
  return {.lr = o.lr, .beta1 = o.beta1, .beta2 = o.beta2, .eps = o.eps, .weight_decay = o.weight_decay,
          .decoupled_weight_decay = true};
}

// One pass over a parameter: compiled per ISA level (AVX-512/AVX2/baseline) because the
// per-element sqrt and division dominate once the loop is vectorised.
template <class T>
STRATA_MULTIVERSION void adam_kernel(T* p, T* m, T* v, const T* g, int64_t n, strata_kernels::AdamScalars<T> s) {
  // firstprivate: with a shared `s` GCC cannot prove the stores to p[i] leave it unchanged,
  // and that alone stops vectorisation.
#pragma omp parallel for simd firstprivate(s) if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) strata_kernels::adam_update(p[i], m[i], v[i], g[i], s);
}

}  // namespace

Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : Adam(single_group(std::move(params), options.lr, options.weight_decay), options) {}

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions options) : Optimizer(std::move(groups)), options_(options) {
  STRATA_CHECK(options_.beta1 >= 0 && options_.beta1 < 1, "Adam: invalid beta1 ", options_.beta1,
               " (needs 0 <= beta1 < 1)");
  STRATA_CHECK(options_.beta2 >= 0 && options_.beta2 < 1, "Adam: invalid beta2 ", options_.beta2,
               " (needs 0 <= beta2 < 1)");
  STRATA_CHECK(std::isfinite(options_.eps) && options_.eps >= 0, "Adam: invalid eps ", options_.eps);
  state_.resize(static_cast<size_t>(num_params()));
}

void Adam::step() {
  NoGradGuard no_grad;
  check_param_count(state_.size(), "Adam.step");
  for_each_param([&](int64_t index, const ParamGroup& group, const Tensor& param) {
    Tensor grad = param.grad();
    if (!grad.defined()) return;
    STRATA_CHECK(param.device().is_cpu(), "Adam.step: parameter ", index, " is on ", param.device(),
                 "; only the CPU step exists so far");
    grad = grad.contiguous();
    ParamState& st = state_[static_cast<size_t>(index)];
    if (st.step == 0) {
      st.exp_avg = zeros(param.shape(), {.dtype = param.dtype(), .device = param.device()});
      st.exp_avg_sq = zeros(param.shape(), {.dtype = param.dtype(), .device = param.device()});
    }
    ++st.step;
    detail::dispatch_floating(param.dtype(), "Adam.step", [&]<class T>() {
      const auto s = strata_kernels::adam_scalars<T>(group.lr, options_.beta1, options_.beta2, options_.eps,
                                                     group.weight_decay, options_.decoupled_weight_decay, st.step);
      T* p = param.data<T>();
      T* m = st.exp_avg.data<T>();
      T* v = st.exp_avg_sq.data<T>();
      const T* g = grad.data<T>();
      adam_kernel(p, m, v, g, param.numel(), s);
    });
  });
  ++step_count_;
}

StateDict Adam::state_dict() const {
  NoGradGuard no_grad;  // the saved copies carry no autograd history
  StateDict out;
  save_common_state(out);
  for (size_t i = 0; i < state_.size(); ++i) {
    const ParamState& st = state_[i];
    if (st.step == 0) continue;
    const auto index = static_cast<int64_t>(i);
    out[param_state_key(index, "step")] = scalar_tensor(static_cast<double>(st.step), {.dtype = DType::Int64});
    out[param_state_key(index, "exp_avg")] = st.exp_avg.clone();
    out[param_state_key(index, "exp_avg_sq")] = st.exp_avg_sq.clone();
  }
  return out;
}

void Adam::load_state_dict(const StateDict& state) {
  NoGradGuard no_grad;
  check_param_count(state_.size(), "Adam.load_state_dict");
  detail::StateReader reader(state, options_.decoupled_weight_decay ? "AdamW.load_state_dict" : "Adam.load_state_dict");
  const detail::CommonState common = detail::read_common_state(reader, groups_);
  std::vector<ParamState> loaded(state_.size());
  for_each_param([&](int64_t index, const ParamGroup&, const Tensor& param) {
    const std::string step_key = param_state_key(index, "step");
    // A parameter that never had a gradient has no state; its step key is then absent.
    // Stray exp_avg entries without a step are reported by check_all_used.
    if (!reader.contains(step_key)) return;
    ParamState& st = loaded[static_cast<size_t>(index)];
    st.step = reader.int64_scalar(step_key);
    STRATA_CHECK(st.step > 0, reader.who(), ": key \"", step_key, "\" holds ", st.step, ", expected > 0");
    st.exp_avg = reader.tensor_like(param_state_key(index, "exp_avg"), param);
    st.exp_avg_sq = reader.tensor_like(param_state_key(index, "exp_avg_sq"), param);
  });
  reader.check_all_used();
  // Everything is valid: only now change the optimizer.
  detail::apply_common_state(common, groups_, step_count_);
  for (size_t i = 0; i < loaded.size(); ++i) {
    ParamState& st = loaded[i];
    if (st.step > 0) {
      st.exp_avg = st.exp_avg.clone();  // own copies: the dict may be reused or changed
      st.exp_avg_sq = st.exp_avg_sq.clone();
    }
    state_[i] = std::move(st);
  }
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options) : Adam(std::move(params), to_adam(options)) {}
AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions options) : Adam(std::move(groups), to_adam(options)) {}

}  // namespace strata::optim
