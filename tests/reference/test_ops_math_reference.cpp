// round/floor/ceil/trunc/sign, isnan/isinf/isfinite, logsumexp, min/argmin, tril/triu and
// one_hot against PyTorch 1.13 (ops_math_reference.py holds the same table): forward values
// and the gradients of sum(out * w) on fixed inputs, float32 and float64. The inputs hold
// half-way values, -0.0, NaN and infinities, ties for min and all -inf rows for logsumexp.
//
// Bounds. Every op but logsumexp is exact on both sides (a rounding to an integer, a copy, a
// comparison, a pick) and so are their gradients (zeros, copies of w): they must agree
// exactly, NaN where NaN. logsumexp: strata rounds a double result once (error <= u |lse|),
// PyTorch sums n exps in the dtype (<= (n + 3) u max(1, |lse|) for the exps, the sum, the
// log and the shift), so the outputs differ by at most (n + 4) u max(1, |lse|). The gradient
// exp(x - lse) w moves by that times |w| plus the roundings of x - lse and of exp on either
// side (exp(t) |t| <= 1/e for t <= 0): 2 ((n + 4) max(1, |lse|) + 2) u max|w|.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "file_test_util.h"
#include "float32_bound.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;

namespace {

using V = std::vector<Tensor>;

constexpr double kInf = std::numeric_limits<double>::infinity();

struct RefOp {
  const char* name;
  std::function<Tensor(const V&)> f;
  std::vector<std::string> args;  // input names; all but idx and xs are differentiable
  int64_t lse_length = 0;         // logsumexp: the reduction's length (else an exact op)
};

const std::vector<RefOp>& ref_ops() {
  static const std::vector<RefOp> ops = {
      {"round", [](const V& v) { return round(v[0]); }, {"xr"}},
      {"floor", [](const V& v) { return floor(v[0]); }, {"xr"}},
      {"ceil", [](const V& v) { return ceil(v[0]); }, {"xr"}},
      {"trunc", [](const V& v) { return trunc(v[0]); }, {"xr"}},
      {"sign", [](const V& v) { return sign(v[0]); }, {"xr"}},
      {"isnan", [](const V& v) { return isnan(v[0]); }, {"xs"}},
      {"isinf", [](const V& v) { return isinf(v[0]); }, {"xs"}},
      {"isfinite", [](const V& v) { return isfinite(v[0]); }, {"xs"}},
      {"logsumexp_last", [](const V& v) { return logsumexp(v[0], {-1}); }, {"x3"}, 4},
      {"logsumexp_0_2_keepdim",
       [](const V& v) {
         return logsumexp(v[0], {0, 2}, true);
       },
       {"x3"},
       8},
      {"logsumexp_large", [](const V& v) { return logsumexp(mul(v[0], 300.0), {1}); }, {"x"}, 5},
      {"logsumexp_specials", [](const V& v) { return logsumexp(v[0], {1}); }, {"xl"}, 3},
      {"min", [](const V& v) { return min(v[0], 1); }, {"xm"}},
      {"min_indices", [](const V& v) { return min_with_indices(v[0], 1).indices; }, {"xm"}},
      {"min_dim0_keepdim", [](const V& v) { return min(v[0], 0, true); }, {"xm"}},
      {"argmin", [](const V& v) { return argmin(v[0], 0); }, {"xm"}},
      {"tril", [](const V& v) { return tril(v[0]); }, {"x3"}},
      {"tril_minus1", [](const V& v) { return tril(v[0], -1); }, {"x3"}},
      {"triu", [](const V& v) { return triu(v[0]); }, {"x3"}},
      {"triu_2", [](const V& v) { return triu(v[0], 2); }, {"x3"}},
      {"one_hot", [](const V& v) { return one_hot(v[0]); }, {"idx"}},
      {"one_hot_7", [](const V& v) { return one_hot(v[0], 7); }, {"idx"}},
  };
  return ops;
}

bool differentiable(const std::string& arg) { return arg != "idx" && arg != "xs"; }

// The script's weights(): w_i = ((7 i) mod 11 - 5) / 4, exact in both dtypes; |w| <= 1.25.
Tensor weights(const Shape& shape, DType dtype) {
  std::vector<double> w(static_cast<size_t>(shape.numel()));
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<double>(static_cast<int64_t>(7 * i % 11) - 5) / 4.0;
  return from_vector(w, shape).to(dtype);
}
constexpr double kMaxWeight = 1.25;

// Inputs of one dtype, under "<name>.<tag>".
void add_inputs(StateDict* in, DType dtype, const std::string& tag) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Generator gen(dtype == DType::Float32 ? 17 : 18);
  Tensor xr = mul(randn({4, 5}, {.dtype = DType::Float64}, &gen), 3.0);
  const std::vector<double> specials = {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, -0.0, 0.0, 3.5, nan, kInf, -kInf};
  for (size_t i = 0; i < specials.size(); ++i) xr.data<double>()[i] = specials[i];
  Tensor xs = randn({4, 5}, {.dtype = DType::Float64}, &gen);
  const std::vector<std::pair<int, double>> at = {{0, nan}, {3, kInf}, {7, -kInf}, {12, -0.0}, {19, nan}};
  for (const auto& [i, v] : at) xs.data<double>()[i] = v;
  // Rows of xl: all -inf, one finite entry, a +inf, a NaN, ordinary numbers.
  const Tensor xl = from_vector(
      std::vector<double>{-kInf, -kInf, -kInf, -kInf, 0.5, -kInf, 1, kInf, 2, 1, nan, 2, 0.25, -1.5, 0.75}, {5, 3});
  // Small integers (many ties) and one NaN (min's NaN rule).
  Tensor xm = randint(-3, 4, {4, 5}, {.dtype = DType::Int64}, &gen).to(DType::Float64);
  xm.data<double>()[8] = nan;
  (*in)["x." + tag] = randn({4, 5}, {.dtype = dtype}, &gen);
  (*in)["x3." + tag] = randn({2, 3, 4}, {.dtype = dtype}, &gen);
  (*in)["xr." + tag] = xr.to(dtype);
  (*in)["xs." + tag] = xs.to(dtype);
  (*in)["xl." + tag] = xl.to(dtype);
  (*in)["xm." + tag] = xm.to(dtype);
}

// Largest |a - b| over the entries, after requiring NaN and infinities at the same places
// (a NaN against a number, or inf against -inf, is a failure, reported as +inf).
double max_diff_same_specials(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  EXPECT_EQ(x.size(), y.size());
  double worst = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    if (std::isnan(x[i]) || std::isnan(y[i]) || std::isinf(x[i]) || std::isinf(y[i])) {
      const bool same = (std::isnan(x[i]) && std::isnan(y[i])) || x[i] == y[i];
      if (!same) worst = kInf;
      continue;
    }
    worst = std::max(worst, std::fabs(x[i] - y[i]));
  }
  return worst;
}

// Largest finite |value| of t, at least 1.
double finite_scale(const Tensor& t) {
  double s = 1;
  for (double v : t.to_vector<double>())
    if (std::isfinite(v)) s = std::max(s, std::fabs(v));
  return s;
}

}  // namespace

TEST(Reference, MathOpsMatchPyTorch) {
  if (!strata::testing::python_has_module("torch"))
    GTEST_SKIP() << "/usr/bin/python3 has no torch (apt install python3-torch)";
  strata::testing::TempDir dir;
  StateDict inputs;
  add_inputs(&inputs, DType::Float32, "f32");
  add_inputs(&inputs, DType::Float64, "f64");
  inputs["idx"] = from_vector(std::vector<int64_t>{3, 0, 4, 4, 1, 0}, {2, 3});
  checkpoint::save_safetensors(dir.file("input.safetensors"), inputs);
  std::string output;
  const int rc = strata::testing::run_python_script(
      "reference/ops_math_reference.py", {dir.file("input.safetensors"), dir.file("output.safetensors")}, &output);
  ASSERT_EQ(rc, 0) << output;
  const StateDict ref = checkpoint::load_safetensors(dir.file("output.safetensors")).tensors;

  int compared_outputs = 0, compared_gradients = 0;
  for (auto [dtype, tag, u] :
       {std::tuple{DType::Float32, "f32", strata::test::kUnitRoundoff32}, std::tuple{DType::Float64, "f64", 0x1p-53}}) {
    for (const RefOp& op : ref_ops()) {
      SCOPED_TRACE(std::string(op.name) + " " + tag);
      V args;
      for (const std::string& a : op.args) {
        Tensor t = inputs.at(a == "idx" ? a : a + "." + tag).clone();
        args.push_back(differentiable(a) ? t.set_requires_grad(true) : t);
      }
      const Tensor out = op.f(args);
      const Tensor& want = ref.at(std::string(op.name) + "." + tag);
      ASSERT_EQ(out.shape(), want.shape());
      ++compared_outputs;
      const double scale = finite_scale(want);
      const double out_bound = op.lse_length ? (op.lse_length + 4) * u * scale : 0.0;
      EXPECT_LE(max_diff_same_specials(out, want), out_bound) << "forward";
      if (!out.requires_grad()) continue;
      sum(mul(out, weights(out.shape(), out.dtype()))).backward();
      const double grad_bound = op.lse_length ? 2 * ((op.lse_length + 4) * scale + 2) * u * kMaxWeight : 0.0;
      for (size_t k = 0; k < args.size(); ++k) {
        if (!args[k].requires_grad()) continue;
        const Tensor& g = ref.at(std::string(op.name) + "." + tag + ".grad" + std::to_string(k));
        EXPECT_LE(max_diff_same_specials(args[k].grad(), g), grad_bound) << "gradient of input " << op.args[k];
        ++compared_gradients;
      }
    }
  }
  // Every op in both dtypes; every differentiable op's gradient (all but the class tests,
  // argmin, min's indices and one_hot: 15 ops) in both.
  EXPECT_EQ(compared_outputs, 2 * static_cast<int>(ref_ops().size()));
  EXPECT_EQ(compared_gradients, 2 * 15);
}
