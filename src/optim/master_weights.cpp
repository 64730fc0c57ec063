#include "strata/optim/master_weights.h"

#include <set>

#include "optim/state_reader.h"
#include "strata/autograd/grad_mode.h"

namespace strata::optim {
namespace {

bool is_16_bit(DType dtype) { return dtype == DType::BFloat16 || dtype == DType::Float16; }

void check_parameter(const Tensor& p, size_t g, size_t i, std::set<const TensorImpl*>& seen) {
  STRATA_CHECK(p.defined(), "MasterWeights: parameter ", i, " of group ", g, " is an undefined tensor");
  STRATA_CHECK(is_16_bit(p.dtype()) || p.dtype() == DType::Float32 || p.dtype() == DType::Float64,
               "MasterWeights: parameter ", i, " of group ", g, " (shape ", p.shape(), ") has dtype ", p.dtype(),
               " (expected bfloat16, float16, float32 or float64)");
  STRATA_CHECK(p.is_contiguous(), "MasterWeights: parameter ", i, " of group ", g, " (shape ", p.shape(),
               ") is not contiguous");
  STRATA_CHECK(seen.insert(p.impl()).second, "MasterWeights: parameter ", i, " of group ", g, " (shape ", p.shape(),
               ") appears more than once; it would be updated twice per step");
}

}  // namespace

MasterWeights::MasterWeights(std::vector<Tensor> params, const ListFactory& make_optimizer)
    : MasterWeights(build({ParamGroup{.params = std::move(params)}}, [&](std::vector<ParamGroup> groups) {
        return make_optimizer(std::move(groups[0].params));
      })) {}

MasterWeights::MasterWeights(std::vector<ParamGroup> groups, const GroupFactory& make_optimizer)
    : MasterWeights(build(std::move(groups), make_optimizer)) {}

MasterWeights::MasterWeights(Parts parts)
    : Optimizer(std::move(parts.groups), /*check_parameters=*/false),
      masters_(std::move(parts.masters)),
      inner_(std::move(parts.inner)) {}

MasterWeights::Parts MasterWeights::build(std::vector<ParamGroup> groups, const GroupFactory& make_optimizer) {
  NoGradGuard no_grad;
  std::set<const TensorImpl*> seen;
  Parts parts;
  std::vector<ParamGroup> master_groups = groups;
  for (size_t g = 0; g < groups.size(); ++g) {
    for (size_t i = 0; i < groups[g].params.size(); ++i) {
      const Tensor& p = groups[g].params[i];
      check_parameter(p, g, i, seen);
      Tensor master = is_16_bit(p.dtype()) ? p.detach().to(DType::Float32).set_requires_grad(true) : p;
      master_groups[g].params[i] = master;
      parts.masters.push_back(master);
    }
  }
  parts.inner = make_optimizer(std::move(master_groups));
  STRATA_CHECK(parts.inner != nullptr, "MasterWeights: the factory returned no optimizer");
  const std::vector<ParamGroup>& built = parts.inner->param_groups();
  STRATA_CHECK(built.size() == groups.size() && parts.inner->num_params() == static_cast<int64_t>(parts.masters.size()),
               "MasterWeights: the factory's optimizer has ", built.size(), " groups and ", parts.inner->num_params(),
               " parameters; it must take the ", groups.size(), " groups of ", parts.masters.size(),
               " masters it was given");
  // The wrapper's groups: the model's parameters with the settings the optimizer chose.
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<Tensor> params = std::move(groups[g].params);
    groups[g] = built[g];
    groups[g].params = std::move(params);
  }
  parts.groups = std::move(groups);
  return parts;
}

const Tensor& MasterWeights::master(int64_t index) const {
  STRATA_CHECK(index >= 0 && index < static_cast<int64_t>(masters_.size()), "MasterWeights.master: index ", index,
               " is outside [0, ", masters_.size(), ")");
  return masters_[static_cast<size_t>(index)];
}

void MasterWeights::step() {
  NoGradGuard no_grad;
  check_param_count(masters_.size(), "MasterWeights.step");
  for_each_param([&](int64_t index, const ParamGroup&, const Tensor& param) {
    Tensor master = masters_[static_cast<size_t>(index)];
    if (master.is_same(param)) return;  // stepped directly with its own gradient
    const Tensor grad = param.grad();
    STRATA_CHECK(!grad.defined() || grad.shape() == param.shape(), "MasterWeights.step: parameter ", index, " ",
                 param.shape(), " has a gradient of shape ", grad.shape());
    // bf16/fp16 -> float32 is exact: the masters see the gradient the model computed.
    master.set_grad(grad.defined() ? grad.to(DType::Float32).contiguous() : Tensor());
  });
  std::vector<ParamGroup>& inner_groups = inner_->param_groups();
  for (size_t g = 0; g < groups_.size(); ++g) {
    inner_groups[g].lr = groups_[g].lr;
    inner_groups[g].weight_decay = groups_[g].weight_decay;
  }
  inner_->step();
  for_each_param([&](int64_t index, const ParamGroup&, const Tensor& param) {
    Tensor master = masters_[static_cast<size_t>(index)];
    if (master.is_same(param)) return;
    if (master.grad().defined()) Tensor(param).copy_(master);  // rounded to nearest
    master.set_grad(Tensor());                                 // holds no gradient memory between steps
  });
  ++step_count_;
}

StateDict MasterWeights::state_dict() const {
  NoGradGuard no_grad;
  StateDict out = inner_->state_dict();
  save_common_state(out);  // this wrapper's lr is the one schedulers set
  for_each_param([&](int64_t index, const ParamGroup&, const Tensor& param) {
    const Tensor& master = masters_[static_cast<size_t>(index)];
    if (!master.is_same(param)) out[param_state_key(index, "master")] = master.clone();
  });
  return out;
}

void MasterWeights::load_state_dict(const StateDict& state) {
  NoGradGuard no_grad;
  check_param_count(masters_.size(), "MasterWeights.load_state_dict");
  detail::StateReader reader(state, "MasterWeights.load_state_dict");
  const detail::CommonState common = detail::read_common_state(reader, groups_);
  StateDict rest = state;  // what the wrapped optimizer reads (it reports strays)
  std::vector<Tensor> loaded(masters_.size());
  for_each_param([&](int64_t index, const ParamGroup&, const Tensor& param) {
    const Tensor& master = masters_[static_cast<size_t>(index)];
    if (master.is_same(param)) return;
    const std::string key = param_state_key(index, "master");
    loaded[static_cast<size_t>(index)] = reader.tensor_like(key, master);
    rest.erase(key);
  });
  inner_->load_state_dict(rest);  // checks its part before it changes anything
  detail::apply_common_state(common, groups_, step_count_);
  for_each_param([&](int64_t index, const ParamGroup&, const Tensor& param) {
    Tensor master = masters_[static_cast<size_t>(index)];
    if (master.is_same(param)) return;
    master.copy_(loaded[static_cast<size_t>(index)]);  // in place: the optimizer holds this tensor
    Tensor(param).copy_(master);
  });
}

}  // namespace strata::optim
