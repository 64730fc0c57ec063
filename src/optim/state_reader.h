#pragma once
// Validating reads from an optimizer StateDict. Optimizers read (and check) every entry
// first and only then change their state, so a bad dict leaves the optimizer untouched.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "strata/optim/optimizer.h"

namespace strata::detail {

class StateReader {
 public:
  // `who` prefixes every error, e.g. "Adam.load_state_dict".
  StateReader(const StateDict& state, std::string who) : state_(state), who_(std::move(who)) {}

  const std::string& who() const { return who_; }
  bool contains(const std::string& key) const { return state_.count(key) != 0; }
  // The entry `key`, checked to exist and to match `like`'s shape and dtype, on like's
  // device (a copy there when it is elsewhere, e.g. CPU state of CUDA parameters).
  Tensor tensor_like(const std::string& key, const Tensor& like);
  // The same with `shape` instead of like's (state smaller than its parameter: Adafactor's
  // row and column statistics).
  Tensor tensor_like(const std::string& key, const Tensor& like, const Shape& shape);
  // One-element int64 / float64 entries (how scalars are stored).
  int64_t int64_scalar(const std::string& key);
  double float64_scalar(const std::string& key);
  // Throws naming the first entry no read consumed (a parameter index or group that does not
  // exist, a misspelt name, state this optimizer's settings never create).
  void check_all_used() const;

 private:
  const Tensor& find(const std::string& key, const std::string& expected);
  const StateDict& state_;
  std::string who_;
  std::set<std::string> used_;
};

// "step" and "group.<g>.lr", read and checked; apply with apply_common_state.
struct CommonState {
  int64_t step = 0;
  std::vector<double> lrs;
};
CommonState read_common_state(StateReader& reader, const std::vector<optim::ParamGroup>& groups);
void apply_common_state(const CommonState& common, std::vector<optim::ParamGroup>& groups, int64_t& step_count);

}  // namespace strata::detail
