#include "optim/state_reader.h"

#include <cmath>

namespace strata::detail {

const Tensor& StateReader::find(const std::string& key, const std::string& expected) {
  auto it = state_.find(key);
  STRATA_CHECK(it != state_.end(), who_, ": missing key \"", key, "\" (expected ", expected, ")");
  STRATA_CHECK(it->second.defined(), who_, ": key \"", key, "\" holds an undefined tensor (expected ", expected, ")");
  used_.insert(key);
  return it->second;
}

Tensor StateReader::tensor_like(const std::string& key, const Tensor& like) {
  return tensor_like(key, like, like.shape());
}

Tensor StateReader::tensor_like(const std::string& key, const Tensor& like, const Shape& shape) {
  const std::string expected = "shape " + shape.str() + ", dtype " + std::string(dtype_name(like.dtype()));
  const Tensor& t = find(key, expected);
  STRATA_CHECK(t.shape() == shape && t.dtype() == like.dtype(), who_, ": key \"", key, "\" has shape ", t.shape(),
               ", dtype ", t.dtype(), "; expected ", expected, " (from the parameter's)");
  // State read from a checkpoint is on the CPU; it follows its parameter (as torch's
  // Optimizer.load_state_dict moves state to the parameter's device).
  return t.device() == like.device() ? t : t.to(like.device());
}

int64_t StateReader::int64_scalar(const std::string& key) {
  const Tensor& t = find(key, "a one-element int64 tensor");
  STRATA_CHECK(t.numel() == 1 && t.dtype() == DType::Int64, who_, ": key \"", key, "\" has shape ", t.shape(),
               ", dtype ", t.dtype(), "; expected a one-element int64 tensor");
  STRATA_CHECK(t.device().is_cpu(), who_, ": key \"", key, "\" is on ", t.device(), "; scalars are read on the CPU");
  return t.contiguous().data<int64_t>()[0];  // not item(): a double would round past 2^53
}

double StateReader::float64_scalar(const std::string& key) {
  const Tensor& t = find(key, "a one-element float64 tensor");
  STRATA_CHECK(t.numel() == 1 && t.dtype() == DType::Float64, who_, ": key \"", key, "\" has shape ", t.shape(),
               ", dtype ", t.dtype(), "; expected a one-element float64 tensor");
  STRATA_CHECK(t.device().is_cpu(), who_, ": key \"", key, "\" is on ", t.device(), "; scalars are read on the CPU");
  return t.item();
}

void StateReader::check_all_used() const {
  for (const auto& [key, value] : state_)
    STRATA_CHECK(used_.count(key) != 0, who_, ": unexpected key \"", key,
                 "\" (no such parameter or group, or state these settings do not create)");
}

CommonState read_common_state(StateReader& reader, const std::vector<optim::ParamGroup>& groups) {
  CommonState common;
  common.step = reader.int64_scalar("step");
  STRATA_CHECK(common.step >= 0, reader.who(), ": key \"step\" is negative (", common.step, ")");
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::string key = "group." + std::to_string(g) + ".lr";
    const double lr = reader.float64_scalar(key);
    STRATA_CHECK(std::isfinite(lr) && lr >= 0, reader.who(), ": key \"", key, "\" holds invalid lr ", lr);
    common.lrs.push_back(lr);
  }
  return common;
}

void apply_common_state(const CommonState& common, std::vector<optim::ParamGroup>& groups, int64_t& step_count) {
  step_count = common.step;
  for (size_t g = 0; g < groups.size(); ++g) groups[g].lr = common.lrs[g];
}

}  // namespace strata::detail
