// MasterWeights: bfloat16/float16 parameters trained through float32 masters in one process.
#include <gtest/gtest.h>

#include <cmath>

#include "strata/strata.h"
#include "unit/optim/optim_test_helpers.h"

using namespace strata;
using namespace strata::optim;
using namespace strata::optim_test;

namespace {

std::unique_ptr<Optimizer> make_adamw(std::vector<Tensor> ps) {
  return std::make_unique<AdamW>(std::move(ps), AdamWOptions{.lr = 0.01, .weight_decay = 0.1});
}

// A float32 copy of 16-bit parameters (exact: every 16-bit value is a float32 value).
std::vector<Tensor> float32_copies(const std::vector<Tensor>& params) {
  std::vector<Tensor> out;
  out.reserve(params.size());
  for (const Tensor& p : params) out.push_back(p.detach().to(DType::Float32).set_requires_grad(true));
  return out;
}

// The 16-bit gradients of step k for the 16-bit run, and the same values in float32 for the
// float32 run, so both runs step on identical gradients.
void set_matching_grads(const std::vector<Tensor>& low, const std::vector<Tensor>& f32, int k) {
  set_grads(low, k, {{1, 0}});
  for (size_t j = 0; j < low.size(); ++j) {
    Tensor p = f32[j];
    p.set_grad(low[j].grad().defined() ? low[j].grad().to(DType::Float32) : Tensor());
  }
}

// Steps a MasterWeights run over 16-bit params and a float32 run side by side: the masters
// are the float32 run bit for bit (same values, same gradients, same optimizer), and each
// parameter is its master rounded to nearest, so |param - float32 run| <= u |float32 run|
// with u the 16-bit unit roundoff (2^-8 for bfloat16's 8-bit significand, 2^-11 for
// float16's 11; float16 values here stay in its normal range).
void expect_matches_float32_run(DType low_dtype, double unit_roundoff, const MasterWeights::ListFactory& make) {
  auto low = make_params(low_dtype);
  auto f32 = float32_copies(low);
  MasterWeights mixed(low, make);
  auto plain = make(f32);
  for (int k = 0; k < 4; ++k) {
    set_matching_grads(low, f32, k);
    mixed.step();
    plain->step();
  }
  for (size_t j = 0; j < low.size(); ++j) {
    SCOPED_TRACE(::testing::Message() << low_dtype << " param " << j);
    EXPECT_EQ(low[j].dtype(), low_dtype);
    EXPECT_EQ(mixed.master(static_cast<int64_t>(j)).dtype(), DType::Float32);
    EXPECT_TRUE(bitwise_equal(mixed.master(static_cast<int64_t>(j)), f32[j].detach()));
    const std::vector<double> got = low[j].to_vector<double>(), want = f32[j].to_vector<double>();
    for (size_t i = 0; i < got.size(); ++i) EXPECT_LE(std::fabs(got[i] - want[i]), unit_roundoff * std::fabs(want[i]));
    EXPECT_TRUE(bitwise_equal(low[j].detach(), f32[j].detach().to(low_dtype)));
  }
  // The run moved the parameters (so the comparison above means something).
  const std::vector<Tensor> initial = make_params(low_dtype);
  int changed = 0;
  for (size_t j = 0; j < low.size(); ++j) {
    const std::vector<double> now = low[j].to_vector<double>(), before = initial[j].to_vector<double>();
    for (size_t i = 0; i < now.size(); ++i) changed += now[i] != before[i] ? 1 : 0;
  }
  EXPECT_GT(changed, 10);
}

}  // namespace

TEST(OptimMasterWeights, Bf16MatchesAFloat32RunToBf16Rounding) {
  expect_matches_float32_run(DType::BFloat16, 0x1p-8, make_adamw);
  expect_matches_float32_run(DType::Float16, 0x1p-11, [](std::vector<Tensor> ps) {
    return std::make_unique<Lion>(std::move(ps), LionOptions{.lr = 0.01, .weight_decay = 0.1});
  });
}

TEST(OptimMasterWeights, MastersAccumulateStepsTheParametersCannotHold) {
  // Steps of 1e-4 on a parameter of 1: each is below bfloat16's resolution there (2^-7), so
  // a bf16 parameter stepped directly would never move; the master adds them up.
  Tensor p = full({4}, 1.0, {.dtype = DType::BFloat16}).set_requires_grad(true);
  MasterWeights opt(
      {p}, [](std::vector<Tensor> ps) { return std::make_unique<SGD>(std::move(ps), SGDOptions{.lr = 1e-4}); });
  for (int k = 0; k < 100; ++k) {
    p.set_grad(full({4}, -1.0, {.dtype = DType::BFloat16}));
    opt.step();
  }
  EXPECT_NEAR(opt.master(0).to_vector<double>()[0], 1.01, 1e-5);
  EXPECT_EQ(p.to_vector<double>()[0], 1.0078125);  // 1.01 rounded to bf16 (1 + 2^-7)
}

TEST(OptimMasterWeights, SkipsParamsWithoutGradAndStepsFloat32ParamsDirectly) {
  auto params = make_params(DType::BFloat16);
  Tensor f32 = zeros({3}, {.dtype = DType::Float32}).set_requires_grad(true);
  params.push_back(f32);
  MasterWeights opt(params, make_adamw);
  EXPECT_TRUE(opt.master(3).is_same(f32));
  expect_skips_params_without_grad(
      [](const std::vector<Tensor>& ps) { return std::make_unique<MasterWeights>(ps, make_adamw); });
  set_grads(params, 0, {{1, 0}});
  const std::vector<double> p1 = params[1].to_vector<double>();
  opt.step();
  EXPECT_EQ(params[1].to_vector<double>(), p1);
  EXPECT_FALSE(opt.master(1).grad().defined());
  EXPECT_NE(f32.to_vector<double>()[0], 0.0);  // stepped through the inner optimizer
  const StateDict state = opt.state_dict();
  EXPECT_EQ(state.at("state.0.master").dtype(), DType::Float32);
  EXPECT_EQ(state.count("state.3.master"), 0u);  // a float32 parameter is its own master
}

TEST(OptimMasterWeights, ResumesBitwiseFromTheMastersNotTheRoundedParams) {
  for (DType dtype : {DType::BFloat16, DType::Float16}) {
    expect_resume_bitwise(
        dtype, [](const std::vector<Tensor>& ps) { return std::make_unique<MasterWeights>(ps, make_adamw); });
  }
  auto params = make_params(DType::BFloat16);
  MasterWeights opt(params, make_adamw);
  run_steps(opt, params, 0, 3);
  // The masters hold bits the bf16 parameters do not.
  EXPECT_FALSE(bitwise_equal(opt.master(0), params[0].detach().to(DType::Float32)));
}

TEST(OptimMasterWeights, SchedulesReachTheWrappedOptimizer) {
  auto params = make_params(DType::BFloat16);
  MasterWeights opt(std::vector<ParamGroup>{{.params = {params[0], params[1]}, .lr = 0.2, .weight_decay = 0.1},
                                            {.params = {params[2]}, .lr = 0.4}},
                    [](std::vector<ParamGroup> groups) { return std::make_unique<AdamW>(std::move(groups)); });
  EXPECT_EQ(opt.param_groups()[1].lr, 0.4);
  EXPECT_TRUE(opt.param_groups()[0].params[0].is_same(params[0]));
  StepSchedule sched(opt, {.step_size = 1, .gamma = 0.5});
  sched.step();
  run_steps(opt, params, 0, 1);
  EXPECT_EQ(opt.optimizer().param_groups()[0].lr, 0.1);
  EXPECT_EQ(opt.optimizer().param_groups()[1].lr, 0.2);
  EXPECT_EQ(opt.optimizer().param_groups()[0].weight_decay, 0.1);
  EXPECT_EQ(opt.state_dict().at("group.1.lr").item(), 0.2);
}

TEST(OptimMasterWeights, RejectsBadInput) {
  auto params = make_params(DType::BFloat16);
  expect_error_naming([&] { MasterWeights({zeros({2}, {.dtype = DType::Int64})}, make_adamw); },
                      {"MasterWeights", "int64"});
  expect_error_naming([&] { MasterWeights({params[0], params[0]}, make_adamw); }, {"more than once"});
  expect_error_naming(
      [&] {
        MasterWeights(params, [](std::vector<Tensor> ps) {
          return make_adamw({ps[0]});  // drops parameters
        });
      },
      {"factory", "3 masters"});
  MasterWeights opt(params, make_adamw);
  run_steps(opt, params, 0, 1);
  StateDict bad = opt.state_dict();
  bad["state.0.master"] = zeros({2, 3}, {.dtype = DType::BFloat16});
  auto fresh_params = make_params(DType::BFloat16);
  MasterWeights fresh(fresh_params, make_adamw);
  expect_error_naming([&] { fresh.load_state_dict(bad); }, {"\"state.0.master\"", "bfloat16", "float32"});
  StateDict bad_inner = opt.state_dict();
  bad_inner.erase("state.1.exp_avg");
  expect_error_naming([&] { fresh.load_state_dict(bad_inner); }, {"missing key", "\"state.1.exp_avg\""});
  EXPECT_EQ(fresh.step_count(), 0);  // failed loads changed nothing
  EXPECT_TRUE(bitwise_equal(fresh.master(0), fresh_params[0].detach().to(DType::Float32)));
}
