// rms_norm, rotary_embedding (with rotary_tables) and grouped-query attention against
// PyTorch 1.13 (fused_ops_reference.py): float64 within 1e-12 relative on the same inputs;
// float32 within float32_bound.h's bound of PyTorch's own float32 error, measured against
// strata's float64 on the same float32 inputs (which the float64 check ties to PyTorch's).
#include <gtest/gtest.h>

#include <string>

#include "file_test_util.h"
#include "float32_bound.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using namespace strata::checkpoint;
using strata::testing::rand64;
using strata::testing::rel_err;

TEST(Reference, FusedNnOpsMatchPyTorch) {
  if (!strata::testing::python_has_module("torch"))
    GTEST_SKIP() << "/usr/bin/python3 has no torch (apt install python3-torch)";
  strata::testing::TempDir dir;
  const double eps = 1e-6, theta = 10000.0;
  const int64_t offset = 3;
  // x doubles as the rms_norm input ([..., D]) and the rotary input ([B, H, T, D]).
  StateDict f64 = {{"x", rand64({2, 3, 6, 8}, 1)}, {"w", rand64({8}, 2)},          {"q", rand64({2, 4, 6, 8}, 3)},
                   {"k", rand64({2, 2, 9, 8}, 4)}, {"v", rand64({2, 2, 9, 8}, 5)}, {"mask", rand64({2, 1, 1, 9}, 6)}};
  StateDict input;
  for (const auto& [name, t] : f64) {
    input[name + ".f64"] = t;
    input[name + ".f32"] = t.to(DType::Float32);
  }
  for (DType dt : {DType::Float32, DType::Float64}) {
    const std::string sfx = dt == DType::Float32 ? ".f32" : ".f64";
    RotaryTables tab = rotary_tables(6, 8, theta, offset, dt);
    input["cos" + sfx] = tab.cos;
    input["sin" + sfx] = tab.sin;
  }
  save_safetensors(dir.file("input.safetensors"), input,
                   {{"eps", "1e-6"}, {"theta", "10000"}, {"offset", std::to_string(offset)}});
  std::string output;
  const int rc = strata::testing::run_python_script(
      "reference/fused_ops_reference.py", {dir.file("input.safetensors"), dir.file("output.safetensors")}, &output);
  ASSERT_EQ(rc, 0) << output;
  StateDict ref = load_safetensors(dir.file("output.safetensors")).tensors;

  EXPECT_LT(rel_err(input["cos.f64"], ref.at("cos.ref")), 1e-14);
  EXPECT_LT(rel_err(input["sin.f64"], ref.at("sin.ref")), 1e-14);
  // The four results on the inputs with suffix sfx, promoted to `dt` (the float32 inputs in
  // float64: the exact values of the float32 computation, up to float64 rounding).
  auto results = [&](const std::string& sfx, DType dt) {
    auto in = [&](const std::string& name) { return input.at(name + sfx).to(dt); };
    return std::vector<std::pair<std::string, Tensor>>{
        {"rms", rms_norm(in("x"), in("w"), eps)},
        {"rope", rotary_embedding(in("x"), in("cos"), in("sin"))},
        {"attn", attention(in("q"), in("k"), in("v"), {.mask = in("mask")})},
        {"attn_causal", attention(in("q"), in("k"), in("v"), {.causal = true, .mask = in("mask")})}};
  };
  for (const auto& [name, got] : results(".f64", DType::Float64))
    EXPECT_LT(rel_err(got, ref.at(name + ".f64")), 1e-12) << name;
  const auto exact = results(".f32", DType::Float64);
  const auto ours = results(".f32", DType::Float32);
  for (size_t i = 0; i < ours.size(); ++i) {
    const std::string& name = ours[i].first;
    const Tensor& want = ref.at(name + ".f32");
    EXPECT_TRUE(
        strata::test::within_float32_bound(rel_err(ours[i].second, want), rel_err(want, exact[i].second), name));
  }
}
