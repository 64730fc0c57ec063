// Tensor::index / index_put_ against PyTorch 1.13 (tests/reference/tensor_index_reference.py
// holds the same table): each expression on the same float64 inputs gives the same shape
// and exactly the same values (indexing copies values, it computes none).
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "file_test_util.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using namespace strata::checkpoint;
using namespace strata::indexing;

namespace {

Tensor longs(std::vector<int64_t> v, Shape shape) { return from_vector(v, shape); }

StateDict make_inputs() {
  Generator gen(21);
  Tensor m12 = randint(0, 2, {5, 6}, {.dtype = DType::Int64}, &gen);
  return {
      {"x", randn({4, 5, 6}, {.dtype = DType::Float64}, &gen)},
      {"y", randn({2, 3, 4, 5}, {.dtype = DType::Float64}, &gen)},
      {"i1", longs({3, 0, -1, 0}, {4})},
      {"i2", longs({4, -5, 2, 0, -1, 3}, {2, 3})},
      {"ia", longs({2, 1}, {2, 1})},
      {"ib", longs({1, 3, -2}, {3})},
      {"ja", longs({0, 2, 1}, {3})},
      {"jb", longs({4, -1, 0}, {3})},
      {"jc", longs({1, 0, -1}, {3})},
      {"m0", longs({1, 0, 1, 1}, {4})},
      {"m12", m12},
      {"v_slices", randn({3, 6}, {.dtype = DType::Float64}, &gen)},
      {"v_row", randn({5}, {.dtype = DType::Float64}, &gen)},
      {"v_adjacent", randn({4, 2, 3}, {.dtype = DType::Float64}, &gen)},
  };
}

Tensor put(const Tensor& x, const std::vector<TensorIndex>& index, const Tensor& value) {
  Tensor out = x.clone();
  out.index_put_(index, value);
  return out;
}

StateDict results(const StateDict& t) {
  const Tensor &x = t.at("x"), &y = t.at("y"), &i1 = t.at("i1"), &i2 = t.at("i2"), &ia = t.at("ia"), &ib = t.at("ib"),
               &ja = t.at("ja"), &jb = t.at("jb"), &jc = t.at("jc");
  const Tensor m0 = t.at("m0").to(DType::Bool), m12 = t.at("m12").to(DType::Bool);
  Tensor put_mask = x.clone();
  put_mask.index_put_({m0}, 0.5);
  Tensor put_int_mask = y.clone();
  put_int_mask.index_put_({1, m12.index({Slice(None, 3), Slice(None, 4)})}, -2.0);
  return {
      {"int_slice", x.index({1, Slice(1, 4)})},
      {"neg_start_step", x.index({Slice(-3, None), Slice(None, None, 2), -1})},
      {"clamped_slices", x.index({Slice(-10, 10), Slice(2, 100, 3)})},
      {"ellipsis_none", x.index({None, Ellipsis, 0, None})},
      {"empty_slice", x.index({Slice(3, 1)})},
      {"adv_one", x.index({i1})},
      {"adv_2d_middle", x.index({Slice(), i2})},
      {"adv_adjacent_broadcast", x.index({Slice(), ia, ib})},
      {"adv_separated", x.index({ia, Slice(), ib})},
      {"adv_after_none", x.index({None, ia, Slice(), ib})},
      {"int_makes_adjacent", y.index({0, Slice(), ja, jb})},
      {"int_between", y.index({jc, 1, Slice(), jb})},
      {"adv_around_int", y.index({Slice(), ja, 1, jb})},
      {"mask_rows", x.index({m0})},
      {"mask_2d", x.index({Slice(), m12})},
      {"mask_then_int", x.index({m0, Slice(), 2})},
      {"mask_compare", x.index({x > 0.5})},
      {"put_slices", put(x, {Slice(1, 3), Slice(None, None, 2)}, t.at("v_slices"))},
      {"put_separated", put(x, {ia, Slice(), ib}, t.at("v_row"))},
      {"put_adjacent", put(x, {Slice(), ia, ib}, t.at("v_adjacent"))},
      {"put_mask_scalar", put_mask},
      {"put_int_mask", put_int_mask},
  };
}

}  // namespace

TEST(Reference, TensorIndexMatchesPyTorch) {
  if (!strata::testing::python_has_module("torch"))
    GTEST_SKIP() << "/usr/bin/python3 has no torch (apt install python3-torch)";
  strata::testing::TempDir dir;
  const StateDict in = make_inputs();
  save_safetensors(dir.file("input.safetensors"), in);
  std::string output;
  const int rc = strata::testing::run_python_script(
      "reference/tensor_index_reference.py", {dir.file("input.safetensors"), dir.file("output.safetensors")}, &output);
  ASSERT_EQ(rc, 0) << output;
  const StateDict ref = load_safetensors(dir.file("output.safetensors")).tensors;
  const StateDict ours = results(in);
  ASSERT_EQ(ours.size(), ref.size());
  for (const auto& [name, want] : ref) {
    ASSERT_TRUE(ours.count(name)) << name << " computed by the script only";
    const Tensor& got = ours.at(name);
    EXPECT_EQ(got.shape(), want.shape()) << name;
    if (got.shape() == want.shape()) {
      EXPECT_EQ(got.to_vector<double>(), want.to_vector<double>()) << name;
    }
  }
}
