// sort / argsort / nonzero / bincount, einsum and broadcast matmul against PyTorch 1.13
// (tests/reference/ops_sort_einsum_reference.py), forward and gradients: sort, argsort,
// nonzero and bincount exactly (they move or count values, NaN and ties included), einsum
// and matmul in float64 within 1e-12 of the reference's scale (their sums may run in
// another order than torch's, each a few ulps).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "file_test_util.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using namespace strata::checkpoint;
using strata::testing::rel_err;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The cases of the script's EINSUM_CASES and MATMUL_CASES.
struct Case {
  std::string name, equation;
  std::vector<std::string> operands;
};
const std::vector<Case> kEinsum = {
    {"matmul", "ij,jk->ik", {"a", "b"}},
    {"bmm", "bij,bjk->bik", {"ba", "bb"}},
    {"scores", "bhqd,bhkd->bhqk", {"q", "k"}},
    {"transpose", "ij->ji", {"a"}},
    {"total", "ij->", {"a"}},
    {"dot", "i,i->", {"v", "v2"}},
    {"ellipsis", "...ij,...jk->...ik", {"ea", "eb"}},
    {"diagonal", "ii->i", {"sq"}},
    {"trace_implicit", "ii", {"sq"}},
    {"outer_implicit", "i,j", {"v", "v2"}},
    {"chain", "ij,jk,k->i", {"a", "b", "w"}},
};
const std::vector<Case> kMatmul = {{"broadcast_4d_3d", "", {"ma", "mb"}}, {"vector_batch", "", {"v", "mb"}}};

StateDict make_inputs() {
  Generator gen(5);
  StateDict in;
  // Small integers (many ties), NaN, infinities and signed zeros.
  std::vector<double> s = {2, kNaN, 1, 2, -0.0, 0.0, 1, -1, std::numeric_limits<double>::infinity(), 2, -kNaN, 1};
  for (int i = 0; i < 16; ++i) s.push_back(static_cast<double>((i * 5) % 4));
  in["sx_f64"] = from_vector(s, {4, 7});
  in["sx_f32"] = in["sx_f64"].to(DType::Float32);
  std::vector<double> nz = {0, 1, 0, 0, kNaN, 0, -2, 0, 0, 0, 0, 3};
  in["nz_f64"] = from_vector(nz, {3, 2, 2});
  in["nz_f32"] = in["nz_f64"].to(DType::Float32);
  in["sg"] = randint(0, 3, {3, 5}, {.dtype = DType::Int64}, &gen).to(DType::Float64);  // ties
  in["bins"] = randint(0, 9, {20}, {.dtype = DType::Int64}, &gen);
  const std::vector<std::pair<std::string, Shape>> shapes = {
      {"a", {3, 4}},       {"b", {4, 5}},  {"ba", {2, 3, 4}}, {"bb", {2, 4, 5}}, {"q", {2, 2, 3, 4}},
      {"k", {2, 2, 5, 4}}, {"v", {4}},     {"v2", {4}},       {"w", {5}},        {"ea", {2, 1, 3, 4}},
      {"eb", {3, 4, 2}},   {"sq", {4, 4}}, {"binw", {20}},    {"mb", {5, 4, 6}}, {"ma", {2, 1, 3, 4}},
  };
  for (const auto& [name, shape] : shapes) in[name] = randn(shape, {.dtype = DType::Float64}, &gen);
  return in;
}

Tensor upstream(const Tensor& out) {
  std::vector<double> w(static_cast<size_t>(out.numel()));
  for (size_t i = 0; i < w.size(); ++i) w[i] = (static_cast<double>(i % 7) - 3) / 4;
  return from_vector(w, out.shape());
}

// out[name] and the gradients of sum(result * upstream) under name_grad<i>.
void with_grads(StateDict* out, const std::string& name, const std::vector<Tensor>& inputs,
                const std::function<Tensor(const std::vector<Tensor>&)>& f) {
  std::vector<Tensor> leaves;
  leaves.reserve(inputs.size());
  for (const Tensor& t : inputs) leaves.push_back(t.clone().set_requires_grad(true));
  const Tensor r = f(leaves);
  (*out)[name] = r.detach();
  sum(mul(r, upstream(r))).backward();
  for (size_t i = 0; i < leaves.size(); ++i) (*out)[name + "_grad" + std::to_string(i)] = leaves[i].grad();
}

StateDict results(const StateDict& in) {
  StateDict out;
  for (const std::string sfx : {"_f32", "_f64"}) {
    const Tensor& s = in.at("sx" + sfx);
    for (const auto& [dim, desc] :
         std::vector<std::pair<int64_t, bool>>{{1, false}, {1, true}, {0, false}, {0, true}}) {
      const ValuesIndices r = sort(s, dim, desc);
      const std::string key = "sort_" + std::to_string(dim) + (desc ? "_desc" : "_asc") + sfx;
      out[key + "_values"] = r.values;
      out[key + "_indices"] = r.indices;
    }
    out["argsort_desc" + sfx] = argsort(s, 1, true);
    out["nonzero" + sfx] = nonzero(in.at("nz" + sfx));
  }
  with_grads(&out, "sort_grad", {in.at("sg")}, [](const std::vector<Tensor>& x) { return sort(x[0], 1).values; });
  out["bincount"] = bincount(in.at("bins"));
  out["bincount_min"] = bincount(in.at("bins"), {}, 12);
  out["bincount_weighted"] = bincount(in.at("bins"), in.at("binw"));
  auto operands = [&](const Case& c) {
    std::vector<Tensor> ops;
    ops.reserve(c.operands.size());
    for (const std::string& n : c.operands) ops.push_back(in.at(n));
    return ops;
  };
  for (const Case& c : kEinsum)
    with_grads(&out, "einsum_" + c.name, operands(c),
               [&c](const std::vector<Tensor>& x) { return einsum(c.equation, x); });
  for (const Case& c : kMatmul)
    with_grads(&out, "matmul_" + c.name, operands(c), [](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); });
  return out;
}

// Exact comparison as doubles, NaN equal to NaN and the sign of zero included.
void expect_identical(const Tensor& got, const Tensor& want, const std::string& name) {
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  ASSERT_EQ(g.size(), w.size()) << name;
  for (size_t i = 0; i < g.size(); ++i) {
    const bool same =
        (std::isnan(g[i]) && std::isnan(w[i])) || (g[i] == w[i] && std::signbit(g[i]) == std::signbit(w[i]));
    EXPECT_TRUE(same) << name << " element " << i << ": " << g[i] << " vs " << w[i];
  }
}

}  // namespace

TEST(Reference, SortCountEinsumMatchPyTorch) {
  if (!strata::testing::python_has_module("torch"))
    GTEST_SKIP() << "/usr/bin/python3 has no torch (apt install python3-torch)";
  strata::testing::TempDir dir;
  const StateDict in = make_inputs();
  save_safetensors(dir.file("input.safetensors"), in);
  std::string output;
  const int rc =
      strata::testing::run_python_script("reference/ops_sort_einsum_reference.py",
                                         {dir.file("input.safetensors"), dir.file("output.safetensors")}, &output);
  ASSERT_EQ(rc, 0) << output;
  const StateDict ref = load_safetensors(dir.file("output.safetensors")).tensors;
  const StateDict ours = results(in);
  ASSERT_EQ(ours.size(), ref.size());
  for (const auto& [name, want] : ref) {
    ASSERT_TRUE(ours.count(name)) << name << " computed by the script only";
    const Tensor& got = ours.at(name);
    ASSERT_EQ(got.shape(), want.shape()) << name;
    if (name.starts_with("einsum") || name.starts_with("matmul")) {
      EXPECT_LT(rel_err(got, want), 1e-12) << name;
    } else {
      expect_identical(got, want, name);
    }
  }
}
