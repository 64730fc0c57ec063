#include "strata/optim/adafactor.h"

#include <algorithm>
#include <cmath>

#include "optim/multi_tensor.h"
#include "optim/state_reader.h"
#include "strata/autograd/grad_mode.h"
#include "strata/ops/elementwise.h"
#include "strata/ops/reduce.h"
#include "strata/optim/param_groups.h"
#include "strata/tensor/factory.h"

namespace strata::optim {
namespace {

bool factored(const Tensor& param) { return param.dim() >= 2; }

// The shapes of the row and column statistics: shape[:-1] and shape[:-2] + shape[-1:].
Shape row_shape(const Shape& shape) { return Shape(shape.begin(), shape.end() - 1); }
Shape col_shape(const Shape& shape) {
  Shape s(shape.begin(), shape.end() - 2);
  s.push_back(shape.back());
  return s;
}

// Root mean square of all elements, the sum of squares accumulated in double.
double rms(const Tensor& t) {
  if (t.numel() == 0) return 0.0;
  return std::sqrt(multi_tensor::sum_of_squares({&t, 1})) / std::sqrt(static_cast<double>(t.numel()));
}

}  // namespace

Adafactor::Adafactor(std::vector<Tensor> params, AdafactorOptions options)
    : Adafactor(one_group(std::move(params), options.lr, options.weight_decay), options) {}

Adafactor::Adafactor(std::vector<ParamGroup> groups, AdafactorOptions options)
    : Optimizer(std::move(groups)), options_(options) {
  const AdafactorOptions& o = options_;
  for (size_t g = 0; g < groups_.size(); ++g)
    STRATA_CHECK(!o.relative_step || groups_[g].lr == 0.0, "Adafactor: group ", g, " has lr ", groups_[g].lr,
                 " but relative_step computes the step size; set relative_step = false to use a given lr");
  STRATA_CHECK(!o.warmup_init || o.relative_step, "Adafactor: warmup_init needs relative_step");
  STRATA_CHECK(std::isfinite(o.eps1) && o.eps1 >= 0, "Adafactor: invalid eps1 ", o.eps1);
  STRATA_CHECK(std::isfinite(o.eps2) && o.eps2 >= 0, "Adafactor: invalid eps2 ", o.eps2);
  STRATA_CHECK(std::isfinite(o.clip_threshold) && o.clip_threshold > 0, "Adafactor: invalid clip_threshold ",
               o.clip_threshold, " (needs > 0)");
  // beta2_t = 1 - t^decay_rate must lie in [0, 1) for every t >= 1.
  STRATA_CHECK(o.decay_rate < 0 && o.decay_rate >= -1, "Adafactor: invalid decay_rate ", o.decay_rate,
               " (needs -1 <= decay_rate < 0)");
  STRATA_CHECK(!o.beta1 || (*o.beta1 >= 0 && *o.beta1 < 1), "Adafactor: invalid beta1 ", o.beta1.value_or(0.0),
               " (needs 0 <= beta1 < 1)");
  state_.resize(static_cast<size_t>(num_params()));
}

double Adafactor::step_size(const ParamGroup& group, const Tensor& param, int64_t step) const {
  double size = group.lr;
  if (options_.relative_step) {
    const double t = static_cast<double>(step);
    const double min_step = options_.warmup_init ? 1e-6 * t : 1e-2;
    size = std::min(min_step, 1.0 / std::sqrt(t));
  }
  if (options_.scale_parameter) size *= std::max(options_.eps2, rms(param));
  return size;
}

void Adafactor::update(const ParamGroup& group, const Tensor& param, const Tensor& grad, ParamState& st) const {
  const TensorOptions like{.dtype = param.dtype(), .device = param.device()};
  if (st.step == 0) {
    if (factored(param)) {
      st.exp_avg_sq_row = zeros(row_shape(param.shape()), like);
      st.exp_avg_sq_col = zeros(col_shape(param.shape()), like);
    } else {
      st.exp_avg_sq = zeros(param.shape(), like);
    }
    if (options_.beta1) st.exp_avg = zeros(param.shape(), like);
  }
  ++st.step;
  const double lr = step_size(group, param, st.step);
  const double beta2 = 1.0 - std::pow(static_cast<double>(st.step), options_.decay_rate);
  Tensor u = grad * grad + options_.eps1;
  if (factored(param)) {
    const auto d = static_cast<int64_t>(param.dim());
    st.exp_avg_sq_row = st.exp_avg_sq_row * beta2 + mean(u, {d - 1}) * (1.0 - beta2);
    st.exp_avg_sq_col = st.exp_avg_sq_col * beta2 + mean(u, {d - 2}) * (1.0 - beta2);
    const Tensor& row = st.exp_avg_sq_row;
    const Tensor r = rsqrt(row / mean(row, {d - 2}, /*keepdim=*/true)).unsqueeze(d - 1);
    const Tensor c = rsqrt(st.exp_avg_sq_col).unsqueeze(d - 2);
    u = r * c * grad;
  } else {
    st.exp_avg_sq = st.exp_avg_sq * beta2 + u * (1.0 - beta2);
    u = rsqrt(st.exp_avg_sq) * grad;
  }
  u = u / std::max(1.0, rms(u) / options_.clip_threshold) * lr;
  if (options_.beta1) {
    st.exp_avg = st.exp_avg * *options_.beta1 + u * (1.0 - *options_.beta1);
    u = st.exp_avg;
  }
  Tensor p = param;
  if (group.weight_decay != 0.0) add_(p, param, -group.weight_decay * lr);
  add_(p, u, -1.0);
}

void Adafactor::step() {
  NoGradGuard no_grad;
  check_param_count(state_.size(), "Adafactor.step");
  // Checked first: a refused step leaves every parameter and its state as they were.
  for_each_param([&](int64_t index, const ParamGroup&, const Tensor& param) {
    const Tensor& grad = param.grad();
    if (!grad.defined()) return;
    STRATA_CHECK(grad.shape() == param.shape() && grad.dtype() == param.dtype() && grad.device() == param.device(),
                 "Adafactor.step: parameter ", index, " is ", param.dtype(), param.shape(), " on ", param.device(),
                 ", its gradient ", grad.dtype(), grad.shape(), " on ", grad.device());
  });
  for_each_param([&](int64_t index, const ParamGroup& group, const Tensor& param) {
    const Tensor& grad = param.grad();
    if (grad.defined()) update(group, param, grad.contiguous(), state_[static_cast<size_t>(index)]);
  });
  ++step_count_;
}

StateDict Adafactor::state_dict() const {
  NoGradGuard no_grad;  // the saved copies carry no autograd history
  StateDict out;
  save_common_state(out);
  for (size_t i = 0; i < state_.size(); ++i) {
    const ParamState& st = state_[i];
    if (st.step == 0) continue;
    const auto index = static_cast<int64_t>(i);
    out[param_state_key(index, "step")] = scalar_tensor(static_cast<double>(st.step), {.dtype = DType::Int64});
    const auto put = [&](const char* name, const Tensor& t) {
      if (t.defined()) out[param_state_key(index, name)] = t.clone();
    };
    put("exp_avg_sq_row", st.exp_avg_sq_row);
    put("exp_avg_sq_col", st.exp_avg_sq_col);
    put("exp_avg_sq", st.exp_avg_sq);
    put("exp_avg", st.exp_avg);
  }
  return out;
}

void Adafactor::load_state_dict(const StateDict& state) {
  NoGradGuard no_grad;
  check_param_count(state_.size(), "Adafactor.load_state_dict");
  detail::StateReader reader(state, "Adafactor.load_state_dict");
  const detail::CommonState common = detail::read_common_state(reader, groups_);
  std::vector<ParamState> loaded(state_.size());
  for_each_param([&](int64_t index, const ParamGroup&, const Tensor& param) {
    const std::string step_key = param_state_key(index, "step");
    if (!reader.contains(step_key)) return;  // never had a gradient; strays are reported below
    ParamState& st = loaded[static_cast<size_t>(index)];
    st.step = reader.int64_scalar(step_key);
    STRATA_CHECK(st.step > 0, reader.who(), ": key \"", step_key, "\" holds ", st.step, ", expected > 0");
    const auto read = [&](const char* name, const Shape& shape) {
      return reader.tensor_like(param_state_key(index, name), param, shape).clone();
    };
    if (factored(param)) {
      st.exp_avg_sq_row = read("exp_avg_sq_row", row_shape(param.shape()));
      st.exp_avg_sq_col = read("exp_avg_sq_col", col_shape(param.shape()));
    } else {
      st.exp_avg_sq = read("exp_avg_sq", param.shape());
    }
    if (options_.beta1) st.exp_avg = read("exp_avg", param.shape());
  });
  reader.check_all_used();
  // Everything is valid: only now change the optimizer.
  detail::apply_common_state(common, groups_, step_count_);
  state_ = std::move(loaded);
}

}  // namespace strata::optim
