#pragma once
// Shared by the optimizer unit tests: fixed parameters and gradients, error checks and the
// bitwise resume check every optimizer's state must pass.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "strata/strata.h"

namespace strata::optim_test {

using optim::Optimizer;

// p0 [2, 3] (factored by Adafactor), p1 [3], p2 [2, 2, 2].
inline std::vector<Tensor> make_params(DType dtype = DType::Float64) {
  Generator gen(5);
  std::vector<Tensor> out;
  for (const Shape& s : {Shape{2, 3}, Shape{3}, Shape{2, 2, 2}})
    out.push_back(randn(s, {.dtype = DType::Float64}, &gen).to(dtype).set_requires_grad(true));
  return out;
}

// Gradients of step `step` (the same for every run); (param, step) pairs in `skip` get none.
inline void set_grads(const std::vector<Tensor>& params, int step, const std::set<std::pair<int, int>>& skip = {}) {
  for (size_t j = 0; j < params.size(); ++j) {
    Tensor p = params[j];
    if (skip.count({static_cast<int>(j), step}) != 0) {
      p.set_grad(Tensor());
      continue;
    }
    Generator gen(1000 + 10 * static_cast<uint64_t>(step) + j);
    p.set_grad(randn(p.shape(), {.dtype = DType::Float64}, &gen).to(p.dtype()));
  }
}

inline void run_steps(Optimizer& opt, const std::vector<Tensor>& params, int first, int count,
                      const std::set<std::pair<int, int>>& skip = {}) {
  for (int k = first; k < first + count; ++k) {
    set_grads(params, k, skip);
    opt.step();
  }
}

inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.raw_data(), cb.raw_data(), ca.nbytes()) == 0;
}

inline void expect_state_bitwise_equal(const StateDict& a, const StateDict& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [key, value] : a) {
    ASSERT_EQ(b.count(key), 1u) << key;
    EXPECT_TRUE(bitwise_equal(value, b.at(key))) << key;
  }
}

// Runs f, expects a strata::Error whose message contains every one of `parts`.
inline void expect_error_naming(const std::function<void()>& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const std::string& part : parts) EXPECT_NE(what.find(part), std::string::npos) << what;
  }
}

using MakeOptimizer = std::function<std::unique_ptr<Optimizer>(const std::vector<Tensor>&)>;

// Trains 3 steps (p1 without a gradient in step 0), saves, trains 2 more; loads the saved
// state into a fresh optimizer over copies of the saved parameters, trains the same 2 steps
// and expects identical bits in the parameters and the state.
inline void expect_resume_bitwise(DType dtype, const MakeOptimizer& make) {
  auto params = make_params(dtype);
  auto opt = make(params);
  run_steps(*opt, params, 0, 3, {{1, 0}});
  opt->scale_lr(0.7);  // as a scheduler would: the saved lr differs from the initial one
  const StateDict saved = opt->state_dict();
  std::vector<Tensor> copies;
  for (const Tensor& p : params) copies.push_back(p.detach().clone().set_requires_grad(true));
  run_steps(*opt, params, 3, 2);

  auto fresh = make(copies);
  fresh->load_state_dict(saved);
  EXPECT_EQ(fresh->step_count(), 3);
  EXPECT_EQ(fresh->param_groups()[0].lr, saved.at("group.0.lr").item());
  expect_state_bitwise_equal(fresh->state_dict(), saved);
  run_steps(*fresh, copies, 3, 2);
  for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(bitwise_equal(params[i], copies[i])) << "param " << i;
  expect_state_bitwise_equal(fresh->state_dict(), opt->state_dict());
}

// A step after zero_grad(set_to_none) changes no parameter and creates no state.
inline void expect_skips_params_without_grad(const MakeOptimizer& make) {
  auto params = make_params();
  auto opt = make(params);
  run_steps(*opt, params, 0, 1, {{1, 0}});  // p1 has no gradient
  const StateDict state = opt->state_dict();
  for (const auto& [key, value] : state) EXPECT_NE(key.rfind("state.1.", 0), 0u) << key << ": state without a gradient";
  std::vector<Tensor> before;
  for (const Tensor& p : params) before.push_back(p.detach().clone());
  opt->zero_grad(/*set_to_none=*/true);
  for (const Tensor& p : params) EXPECT_FALSE(p.grad().defined());
  opt->step();
  for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(bitwise_equal(params[i], before[i])) << "param " << i;
  StateDict after = opt->state_dict();
  after.erase("step");
  StateDict expected = state;
  expected.erase("step");
  expect_state_bitwise_equal(after, expected);
}

}  // namespace strata::optim_test
