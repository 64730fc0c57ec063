// The index and reduction ops against PyTorch 1.13 (tests/reference/ops_index_reference.py):
// same inputs, forward values within 1e-12 (float64) relative to the reference's scale or,
// in float32, within float32_bound.h's bound of PyTorch's own float32 error (measured against
// strata's float64 on the same float32 inputs), indices exactly. Gradients are checked by finite differences in
// tests/unit/ops/test_ops_index_reduce.cpp.
#include <gtest/gtest.h>

#include <string>

#include "file_test_util.h"
#include "float32_bound.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using namespace strata::checkpoint;
using strata::testing::rel_err;

namespace {

Tensor index(const std::vector<int64_t>& v, const Shape& shape) { return from_vector(v, shape); }

// The int64 indices every op reads, under the names the script reads (prefix idx_).
StateDict make_indices() {
  Generator gen(3);
  return {
      {"idx_sel", index({5, 0, 5, 2}, {4})},
      {"idx_sel_y", index({2, 0}, {2})},
      {"idx_add", index({3, 0, 3}, {3})},
      {"idx_gather_x", randint(0, 6, {4, 3}, {.dtype = DType::Int64}, &gen)},
      {"idx_gather_y", randint(0, 5, {2, 4, 3}, {.dtype = DType::Int64}, &gen)},
      {"idx_scatter", randint(0, 4, {2, 6}, {.dtype = DType::Int64}, &gen)},
  };
}

// Inputs in one dtype: normal x, y, src and small integers (many ties) in `ties`.
void add_inputs(StateDict* in, DType dtype, const std::string& sfx) {
  Generator gen(dtype == DType::Float32 ? 11 : 12);
  (*in)["x" + sfx] = randn({4, 6}, {.dtype = dtype}, &gen);
  (*in)["y" + sfx] = randn({3, 4, 5}, {.dtype = dtype}, &gen);
  (*in)["src" + sfx] = randn({3, 6}, {.dtype = dtype}, &gen);
  (*in)["ties" + sfx] = randint(0, 3, {4, 5}, {.dtype = DType::Int64}, &gen).to(dtype);
}

// strata's results under the script's names.
StateDict results(const StateDict& in, const std::string& sfx) {
  const Tensor &x = in.at("x" + sfx), &y = in.at("y" + sfx), &ties = in.at("ties" + sfx), &src = in.at("src" + sfx);
  auto idx = [&](const char* name) { return in.at(std::string("idx_") + name); };
  StateDict out = {
      {"index_select_1", index_select(x, 1, idx("sel"))},
      {"index_select_neg3", index_select(y, -3, idx("sel_y"))},
      {"index_add_0", index_add(x, 0, idx("add"), src)},
      {"gather_1", gather(x, 1, idx("gather_x"))},
      {"gather_0_transposed", gather(y.transpose(0, 2), 0, idx("gather_y"))},
      {"scatter_add_0", scatter_add(x, 0, idx("scatter"), src)},
      {"cat_neg2", cat({x, src}, -2)},
      {"cat_neg1", cat({x, y.select(0, 0).narrow(1, 0, 2)}, -1)},
      {"stack_neg2", stack({x, mul(x, 2.0)}, -2)},
      {"mean_0_2_keepdim", mean(y, {0, 2}, true)},
      {"var_1", var(y, {1})},
      {"var_0_2_biased_keepdim", var(y, {0, 2}, {.correction = 0, .keepdim = true})},
      {"var_all", var(y)},
      {"argmax_neg1", argmax(ties, -1)},
      {"log_softmax_1", log_softmax(y, 1)},
      {"log_softmax_neg1", log_softmax(x, -1)},
      {"cumsum_2", cumsum(y, 2)},
      {"cumsum_0", cumsum(x, 0)},
  };
  auto add_pair = [&](const std::string& name, const ValuesIndices& r) {
    out[name + "_values"] = r.values;
    out[name + "_indices"] = r.indices;
  };
  add_pair("max_1", max_with_indices(ties, 1));
  add_pair("max_0_keepdim", max_with_indices(ties, 0, true));
  add_pair("topk_3_1", topk(x, 3, 1));
  add_pair("topk_2_0_smallest", topk(y, 2, 0, /*largest=*/false));
  auto add_pieces = [&](const std::string& name, const std::vector<Tensor>& pieces) {
    for (size_t i = 0; i < pieces.size(); ++i) out[name + "_" + std::to_string(i)] = pieces[i];
  };
  add_pieces("split_4_neg1", split(x, 4, -1));
  add_pieces("split_sizes", split(x, std::vector<int64_t>{1, 3, 2}, 1));
  add_pieces("chunk_3_neg1", chunk(y, 3, -1));
  StateDict named;
  for (auto& [name, t] : out) named[name + sfx] = t;
  return named;
}

bool is_index_result(const std::string& name) {
  return name.find("indices") != std::string::npos || name.find("argmax") != std::string::npos;
}

}  // namespace

TEST(Reference, IndexAndReduceOpsMatchPyTorch) {
  if (!strata::testing::python_has_module("torch"))
    GTEST_SKIP() << "/usr/bin/python3 has no torch (apt install python3-torch)";
  strata::testing::TempDir dir;
  StateDict in = make_indices();
  add_inputs(&in, DType::Float32, "_f32");
  add_inputs(&in, DType::Float64, "_f64");
  save_safetensors(dir.file("input.safetensors"), in);
  std::string output;
  const int rc = strata::testing::run_python_script(
      "reference/ops_index_reference.py", {dir.file("input.safetensors"), dir.file("output.safetensors")}, &output);
  ASSERT_EQ(rc, 0) << output;
  const StateDict ref = load_safetensors(dir.file("output.safetensors")).tensors;

  StateDict ours = results(in, "_f32");
  ours.merge(results(in, "_f64"));
  // The float32 inputs in float64, under their own names: the exact values of the float32 results.
  StateDict promoted = in;
  for (auto& [name, t] : promoted)
    if (name.ends_with("_f32")) t = t.to(DType::Float64);
  const StateDict exact = results(promoted, "_f32");
  ASSERT_EQ(ours.size(), ref.size());
  for (const auto& [name, want] : ref) {
    ASSERT_TRUE(ours.count(name)) << name << " computed by the script only";
    const Tensor& got = ours.at(name);
    ASSERT_EQ(got.shape(), want.shape()) << name;
    if (is_index_result(name)) {
      EXPECT_EQ(got.to_vector<double>(), want.to_vector<double>()) << name;
    } else {
      const bool wide = name.ends_with("_f64");
      EXPECT_EQ(got.dtype(), wide ? DType::Float64 : DType::Float32) << name;
      if (wide) {
        EXPECT_LT(rel_err(got, want), 1e-12) << name;
      } else {
        EXPECT_TRUE(strata::test::within_float32_bound(rel_err(got, want), rel_err(want, exact.at(name)), name));
      }
    }
  }
}
