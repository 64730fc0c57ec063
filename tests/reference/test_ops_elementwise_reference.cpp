// The elementwise ops against PyTorch 1.13: forward values and the gradients of
// sum(out * w) on fixed inputs, float32 (relative error < 1e-6) and float64 (< 1e-12).
// The inputs include values exactly at clamp's bounds and minimum/maximum ties, where the
// gradient rules are PyTorch's choices. ops_elementwise_reference.py holds the same table.
#include <gtest/gtest.h>

#include <functional>

#include "file_test_util.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using strata::testing::rel_err;

namespace {

using V = std::vector<Tensor>;

struct RefOp {
  const char* name;
  std::function<Tensor(const V&)> f;
  std::vector<std::string> args;  // input names; x, xp, y, yp are differentiable
};

const std::vector<RefOp>& ref_ops() {
  static const std::vector<RefOp> ops = {
      {"sigmoid", [](const V& v) { return sigmoid(v[0]); }, {"x"}},
      {"silu", [](const V& v) { return silu(v[0]); }, {"x"}},
      {"relu", [](const V& v) { return relu(v[0]); }, {"x"}},
      {"abs", [](const V& v) { return abs(v[0]); }, {"x"}},
      {"exp", [](const V& v) { return exp(v[0]); }, {"x"}},
      {"tanh", [](const V& v) { return tanh(v[0]); }, {"x"}},
      {"log", [](const V& v) { return log(v[0]); }, {"xp"}},
      {"sqrt", [](const V& v) { return sqrt(v[0]); }, {"xp"}},
      {"rsqrt", [](const V& v) { return rsqrt(v[0]); }, {"xp"}},
      {"clamp", [](const V& v) { return clamp(v[0], -0.5, 0.75); }, {"x"}},
      {"clamp_min", [](const V& v) { return clamp(v[0], -0.5, std::nullopt); }, {"x"}},
      {"clamp_max", [](const V& v) { return clamp(v[0], std::nullopt, 0.75); }, {"x"}},
      {"add", [](const V& v) { return add(v[0], v[1]); }, {"x", "y"}},
      {"sub", [](const V& v) { return sub(v[0], v[1]); }, {"y", "x"}},
      {"mul", [](const V& v) { return mul(v[0], v[1]); }, {"x", "y"}},
      {"div", [](const V& v) { return div(v[0], v[1]); }, {"x", "yp"}},
      {"minimum", [](const V& v) { return minimum(v[0], v[1]); }, {"x", "y"}},
      {"maximum", [](const V& v) { return maximum(v[0], v[1]); }, {"y", "x"}},
      {"pow", [](const V& v) { return pow(v[0], v[1]); }, {"xp", "y"}},
      {"pow_scalar_exponent", [](const V& v) { return pow(v[0], 2.5); }, {"xp"}},
      {"pow_scalar_base", [](const V& v) { return pow(1.5, v[0]); }, {"x"}},
      {"where", [](const V& v) { return where(v[0], v[1], v[2]); }, {"cond", "x", "y"}},
      {"masked_fill", [](const V& v) { return masked_fill(v[0], v[1], -2.0); }, {"x", "cond"}},
      {"eq", [](const V& v) { return eq(v[0], v[1]); }, {"x", "y"}},
      {"ne", [](const V& v) { return ne(v[0], v[1]); }, {"x", "y"}},
      {"lt", [](const V& v) { return lt(v[0], v[1]); }, {"x", "y"}},
      {"le", [](const V& v) { return le(v[0], v[1]); }, {"x", "y"}},
      {"gt", [](const V& v) { return gt(v[0], v[1]); }, {"x", "y"}},
      {"ge", [](const V& v) { return ge(v[0], v[1]); }, {"x", "y"}},
  };
  return ops;
}

// x [4, 5] with entries exactly at clamp's bounds, y [5] tying with two entries of x,
// positive xp [4, 5] and yp [5], a Bool cond [4, 1] and the weights w [4, 5].
StateDict make_inputs(DType dtype, const std::string& tag) {
  Generator gen(7);
  Tensor x = randn({4, 5}, {.dtype = DType::Float64}, &gen);
  Tensor y = randn({5}, {.dtype = DType::Float64}, &gen);
  double* px = x.data<double>();
  double* py = y.data<double>();
  px[0] = -0.5;
  px[1] = 0.75;
  py[0] = px[0];
  py[2] = px[7];
  StateDict in;
  in["x." + tag] = x.to(dtype);
  in["y." + tag] = y.to(dtype);
  in["xp." + tag] = add(mul(rand({4, 5}, {.dtype = dtype}, &gen), 2.0), 0.5);
  in["yp." + tag] = add(mul(rand({5}, {.dtype = dtype}, &gen), 2.0), 0.5);
  in["cond." + tag] = gt(randn({4, 1}, {.dtype = dtype}, &gen), 0.0);
  in["w." + tag] = randn({4, 5}, {.dtype = dtype}, &gen);
  return in;
}

bool differentiable(const std::string& arg) { return arg != "cond"; }

}  // namespace

TEST(Reference, ElementwiseOpsMatchPyTorch) {
  if (!strata::testing::python_has_module("torch"))
    GTEST_SKIP() << "/usr/bin/python3 has no torch (apt install python3-torch)";
  strata::testing::TempDir dir;
  StateDict inputs = make_inputs(DType::Float32, "f32");
  inputs.merge(make_inputs(DType::Float64, "f64"));
  checkpoint::save_safetensors(dir.file("input.safetensors"), inputs);
  std::string output;
  int rc = strata::testing::run_python_script("reference/ops_elementwise_reference.py",
                                              {dir.file("input.safetensors"), dir.file("output.safetensors")}, &output);
  ASSERT_EQ(rc, 0) << output;
  StateDict ref = checkpoint::load_safetensors(dir.file("output.safetensors")).tensors;

  int compared_outputs = 0, compared_gradients = 0;
  for (auto [dtype, tag, tol] : {std::tuple{DType::Float32, "f32", 1e-6}, std::tuple{DType::Float64, "f64", 1e-12}}) {
    for (const RefOp& op : ref_ops()) {
      SCOPED_TRACE(std::string(op.name) + " " + tag);
      V args;
      for (const std::string& a : op.args) {
        Tensor t = inputs.at(a + "." + tag).clone();
        args.push_back(differentiable(a) ? t.set_requires_grad(true) : t);
      }
      Tensor out = op.f(args);
      const Tensor& want = ref.at(std::string(op.name) + "." + tag);
      ASSERT_EQ(out.shape(), want.shape());
      ++compared_outputs;
      if (out.dtype() == DType::Bool) {
        EXPECT_EQ(out.to(dtype).to_vector<double>(), want.to_vector<double>());
        continue;
      }
      EXPECT_LT(rel_err(out, want), tol) << "forward";
      sum(mul(out, inputs.at(std::string("w.") + tag))).backward();
      for (size_t k = 0; k < args.size(); ++k) {
        if (!args[k].requires_grad()) continue;
        const Tensor& g = ref.at(std::string(op.name) + "." + tag + ".grad" + std::to_string(k));
        EXPECT_LT(rel_err(args[k].grad(), g), tol) << "gradient of input " << k << " (" << op.args[k] << ")";
        ++compared_gradients;
      }
    }
  }
  // Every op of the table, and every gradient of a differentiable input, in both dtypes.
  EXPECT_EQ(compared_outputs, 2 * static_cast<int>(ref_ops().size()));
  EXPECT_EQ(compared_gradients, 2 * 31);
}
