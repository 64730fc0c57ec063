// SGD with Nesterov momentum, Lion, Adafactor and every lr schedule against PyTorch 1.13
// (optim_steps_reference.py: torch.optim.SGD and torch's schedulers; Lion and Adafactor,
// which torch 1.13 lacks, written out there from their definitions). Five steps on fixed
// random gradients, with some parameters left without a gradient in some steps.
//
// Bounds (u = 2^-53, K = 5 steps, both sides rounding independently):
// - float64 parameters, relative to the largest |p| (test_util.h rel_err):
//   Lion: the step is p * (1 - lr wd) + (-lr) sign(c), sign exact unless c is at rounding
//     level (random gradients keep it far from that): 2 roundings per step and side, each
//     <= u |p|: 2 * 2 * K * u.
//   SGD: 8 roundings per step and side, the momentum buffer carrying each rounding on with
//     weight sum momentum^k <= 1 / (1 - 0.9) = 10: 2 * 8 * 10 * K * u.
//   Adafactor: per step and side 2 roundings of p and an update (|u| <= |p|) computed through
//     about 40 roundings plus three reductions over n <= 24 elements (means, RMS: gamma_n
//     each, 2n to be safe): 2 * K * (2 + 40 + 6 n) * u.
// - float32: float32_bound.h's bound of PyTorch's own float32 error, measured against
//   strata's float64 run on the same float32 inputs (which the float64 check ties to torch).
// - schedules: torch's chained (recursive) forms multiply the previous lr by a ratio each
//   step, each product within a few roundings; over s steps |ours - torch| <=
//   (s + 2) * 8 * u * max_lr (the ratios are <= 1 in decays, and add relative errors in
//   warm-ups, whose lr is <= max_lr).
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "file_test_util.h"
#include "float32_bound.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using namespace strata::optim;
using strata::testing::rand64;
using strata::testing::rel_err;

namespace {

constexpr double kU = 0x1p-53;
constexpr int kSteps = 5;
const std::vector<Shape> kShapes = {{4, 5}, {5}, {2, 3, 4}};
// (param, step) pairs without a gradient: lazily created state and per-parameter step counts.
const std::set<std::pair<int, int>> kNoGrad = {{1, 0}, {2, 3}};

std::string grad_key(int step, int param) { return "g." + std::to_string(step) + "." + std::to_string(param); }

StateDict make_inputs() {
  StateDict f64;
  for (size_t j = 0; j < kShapes.size(); ++j) f64["p." + std::to_string(j)] = rand64(kShapes[j], 10 + j);
  for (int k = 0; k < kSteps; ++k)
    for (int j = 0; j < static_cast<int>(kShapes.size()); ++j)
      if (kNoGrad.count({j, k}) == 0) f64[grad_key(k, j)] = rand64(kShapes[static_cast<size_t>(j)], 100 + 10 * k + j);
  StateDict input;
  for (const auto& [name, t] : f64) {
    input[name + ".f64"] = t;
    input[name + ".f32"] = t.to(DType::Float32);
  }
  return input;
}

using MakeOptimizer = std::function<std::unique_ptr<Optimizer>(std::vector<Tensor>)>;

// Runs the optimizer on the inputs with suffix sfx, converted to `dtype`; the final params.
std::vector<Tensor> run(const StateDict& input, const std::string& sfx, DType dtype, const MakeOptimizer& make,
                        StateDict* state = nullptr) {
  std::vector<Tensor> params;
  for (size_t j = 0; j < kShapes.size(); ++j)
    params.push_back(input.at("p." + std::to_string(j) + sfx).to(dtype).clone().set_requires_grad(true));
  auto opt = make(params);
  for (int k = 0; k < kSteps; ++k) {
    opt->zero_grad(/*set_to_none=*/true);
    for (int j = 0; j < static_cast<int>(params.size()); ++j) {
      auto it = input.find(grad_key(k, j) + sfx);
      if (it != input.end()) params[static_cast<size_t>(j)].set_grad(it->second.to(dtype).clone());
    }
    opt->step();
  }
  if (state != nullptr) *state = opt->state_dict();
  return params;
}

class OptimReference : public ::testing::Test {
 protected:
  void SetUp() override {
    static const bool has_torch = strata::testing::python_has_module("torch");
    if (!has_torch) GTEST_SKIP() << "/usr/bin/python3 has no torch (apt install python3-torch)";
    static const StateDict* cached = nullptr;
    static StateDict in, out;
    if (cached == nullptr) {
      in = make_inputs();
      strata::testing::TempDir dir;
      checkpoint::save_safetensors(dir.file("input.safetensors"), in, {});
      std::string log;
      const int rc = strata::testing::run_python_script(
          "reference/optim_steps_reference.py", {dir.file("input.safetensors"), dir.file("output.safetensors")}, &log);
      ASSERT_EQ(rc, 0) << log;
      out = checkpoint::load_safetensors(dir.file("output.safetensors")).tensors;
      cached = &out;
    }
    input = &in;
    ref = &out;
  }

  // float64 within bound64 (relative to the largest |p|), float32 within float32_bound.
  void expect_matches(const std::string& name, const MakeOptimizer& make, double bound64) {
    const std::vector<Tensor> ours64 = run(*input, ".f64", DType::Float64, make);
    const std::vector<Tensor> ours32 = run(*input, ".f32", DType::Float32, make);
    const std::vector<Tensor> exact32 = run(*input, ".f32", DType::Float64, make);
    for (size_t j = 0; j < kShapes.size(); ++j) {
      const std::string key = name + "." + std::to_string(j);
      const Tensor& want64 = ref->at(key + ".f64");
      const Tensor& want32 = ref->at(key + ".f32");
      const double error64 = rel_err(ours64[j], want64);
      std::printf("float64: %s: error %.3g, bound %.3g\n", key.c_str(), error64, bound64);
      EXPECT_LE(error64, bound64) << key << " float64";
      EXPECT_GT(rel_err(ours64[j], input->at("p." + std::to_string(j) + ".f64")), 1e3 * bound64)
          << key << ": the parameter barely moved, so the comparison would prove little";
      EXPECT_TRUE(strata::test::within_float32_bound(rel_err(ours32[j], want32), rel_err(want32, exact32[j]), key));
    }
  }

  const StateDict* input = nullptr;
  const StateDict* ref = nullptr;
};

double adafactor_bound() {
  const double n = 24;  // the most elements one reduction adds (the [2, 3, 4] parameter)
  return 2.0 * kSteps * (2 + 40 + 6 * n) * kU;
}

}  // namespace

TEST_F(OptimReference, SgdNesterovMatchesTorch) {
  expect_matches(
      "sgd_nesterov",
      [](std::vector<Tensor> ps) {
        return std::make_unique<SGD>(std::move(ps),
                                     SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true, .weight_decay = 0.01});
      },
      2.0 * 8 * 10 * kSteps * kU);
}

TEST_F(OptimReference, LionMatchesThePaper) {
  expect_matches(
      "lion",
      [](std::vector<Tensor> ps) {
        return std::make_unique<Lion>(std::move(ps),
                                      LionOptions{.lr = 0.01, .beta1 = 0.9, .beta2 = 0.99, .weight_decay = 0.1});
      },
      2.0 * 2 * kSteps * kU);
}

TEST_F(OptimReference, AdafactorMatchesItsDefinition) {
  const std::vector<std::pair<std::string, AdafactorOptions>> configs = {
      {"adafactor_default", {}},
      {"adafactor_lr_beta1",
       {.lr = 0.01,
        .clip_threshold = 0.5,
        .beta1 = 0.9,
        .weight_decay = 0.01,
        .scale_parameter = false,
        .relative_step = false}},
      {"adafactor_warmup_init", {.weight_decay = 0.1, .warmup_init = true}}};
  for (const auto& [name, options] : configs) {
    SCOPED_TRACE(name);
    expect_matches(
        name, [o = options](std::vector<Tensor> ps) { return std::make_unique<Adafactor>(std::move(ps), o); },
        adafactor_bound());
  }
  // The factored statistics themselves (the [4, 5] parameter's row and column averages).
  StateDict state;
  run(
      *input, ".f64", DType::Float64, [](std::vector<Tensor> ps) { return std::make_unique<Adafactor>(std::move(ps)); },
      &state);
  EXPECT_LE(rel_err(state.at("state.0.exp_avg_sq_row"), ref->at("adafactor_default.row.0.f64")), adafactor_bound());
  EXPECT_LE(rel_err(state.at("state.0.exp_avg_sq_col"), ref->at("adafactor_default.col.0.f64")), adafactor_bound());
  EXPECT_EQ(state.at("state.0.exp_avg_sq_row").shape(), Shape({4}));
  EXPECT_EQ(state.at("state.2.exp_avg_sq_col").shape(), Shape({2, 4}));
  EXPECT_EQ(state.at("state.2.step").item(), 4.0);  // no gradient in step 3
}

namespace {

using MakeSchedule = std::function<std::unique_ptr<LrScheduler>(Optimizer&)>;

void expect_schedule_matches(const StateDict& ref, const std::string& name, const MakeSchedule& make) {
  const double max_lr = 0.5;
  const Tensor& want = ref.at("sched." + name);
  const int64_t steps = want.numel();
  SGD opt({zeros({1}, {.dtype = DType::Float64}).set_requires_grad(true)}, {.lr = max_lr});
  auto sched = make(opt);
  std::vector<double> got;
  for (int64_t s = 0; s < steps; ++s) {
    got.push_back(opt.param_groups()[0].lr);
    sched->step();
  }
  const std::vector<double> expected = want.to_vector<double>();
  const double bound = static_cast<double>(steps + 2) * 8 * kU * max_lr;
  for (size_t s = 0; s < got.size(); ++s) EXPECT_NEAR(got[s], expected[s], bound) << name << " step " << s;
}

}  // namespace

TEST_F(OptimReference, SchedulesMatchTorch) {
  const int64_t W = 5, T = 30;
  const auto warmup_decay = [&](DecayShape shape, double r) -> MakeSchedule {
    return [=](Optimizer& o) {
      return std::make_unique<WarmupDecaySchedule>(
          o, WarmupDecayOptions{.warmup_steps = W, .total_steps = T, .decay = shape, .min_lr_ratio = r});
    };
  };
  expect_schedule_matches(*ref, "warmup_linear", warmup_decay(DecayShape::Linear, 0.1));
  expect_schedule_matches(*ref, "warmup_cosine", warmup_decay(DecayShape::Cosine, 0.1));
  expect_schedule_matches(*ref, "warmup_cosine", [&](Optimizer& o) {
    return std::make_unique<CosineSchedule>(o, CosineScheduleOptions{.warmup_steps = W, .total_steps = T});
  });
  expect_schedule_matches(*ref, "warmup_constant", warmup_decay(DecayShape::Constant, 0.0));
  expect_schedule_matches(*ref, "step", [](Optimizer& o) {
    return std::make_unique<StepSchedule>(o, StepScheduleOptions{.step_size = 7, .gamma = 0.3});
  });
  expect_schedule_matches(*ref, "one_cycle", [](Optimizer& o) {
    return std::make_unique<OneCycleSchedule>(o, OneCycleOptions{.total_steps = 40});
  });
  expect_schedule_matches(*ref, "one_cycle_linear_three_phase", [](Optimizer& o) {
    return std::make_unique<OneCycleSchedule>(o, OneCycleOptions{.total_steps = 40,
                                                                 .pct_start = 0.25,
                                                                 .div_factor = 10.0,
                                                                 .final_div_factor = 100.0,
                                                                 .cosine = false,
                                                                 .three_phase = true});
  });
  for (const auto& [name, shape] : {std::pair{"wsd_linear", DecayShape::Linear}, {"wsd_cosine", DecayShape::Cosine}})
    expect_schedule_matches(*ref, name, [shape = shape](Optimizer& o) {
      return std::make_unique<WsdSchedule>(
          o, WsdOptions{.warmup_steps = 5, .total_steps = 40, .decay_fraction = 0.25, .decay = shape});
    });
}
