// nn::MultiheadAttention, LayerNorm without bias / affine, and Embedding with padding_idx
// against PyTorch 1.13 (nn_modules_reference.py) in float64: same weights (strata's state
// dict loaded by name into torch's module, strictly), same inputs and masks; outputs, the
// attention weights and the gradients of every input and parameter.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "file_test_util.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using namespace strata::checkpoint;
using strata::testing::rand64;
using strata::testing::rel_err;

namespace {

// The float64 bound. Both sides compute the same exact values through at most kStages
// chained stages (forward: projection, scores, softmax, weighted sum, output projection;
// backward: the five transposed), each a sum of at most n terms, which errs by at most
// gamma_n = n u / (1 - n u) relative to the sum of its terms' magnitudes (Higham (3.5)).
// Errors add over stages, and |a - b| <= |a - x| + |b - x| over the two sides. The sum of
// magnitudes exceeds the result's scale (rel_err divides by the largest reference entry) by
// kGrowth at most for standard-normal inputs of these sizes: the softmax's weights are below
// 1 and each product has at most n terms of the operands' scale, so kGrowth = n covers it.
constexpr double kUnitRoundoff64 = 0x1p-53;
constexpr double kStages = 10;
double float64_bound(double n) {
  const double gamma = n * kUnitRoundoff64 / (1 - n * kUnitRoundoff64);
  return 2 * kStages * gamma * n;
}

enum class MaskKind { None, Bool, Float };

struct MhaCase {
  std::string name;
  int64_t embed = 8, heads = 2, kdim = 8, vdim = 8, batch = 2, target = 4, source = 6;
  bool bias = true, batch_first = true, self = false, need_weights = false, average = true;
  MaskKind kpm = MaskKind::None, attn = MaskKind::None;
  bool attn_per_head = false;  // [B * H, L, S] instead of [L, S]

  std::string describe() const {
    auto b = [](bool v) { return v ? "1" : "0"; };
    return "E=" + std::to_string(embed) + ",H=" + std::to_string(heads) + ",kdim=" + std::to_string(kdim) +
           ",vdim=" + std::to_string(vdim) + ",bias=" + b(bias) + ",batch_first=" + b(batch_first) +
           ",self=" + b(self) + ",need_weights=" + b(need_weights) + ",average=" + b(average) +
           ",kpm_bool=" + b(kpm == MaskKind::Bool) + ",attn_bool=" + b(attn == MaskKind::Bool);
  }
  Shape layout(int64_t length, int64_t dim) const {
    return batch_first ? Shape{batch, length, dim} : Shape{length, batch, dim};
  }
};

// 0/1 masks (1 = excluded) that leave every query at least key 0: example b pads its last
// b + 1 keys; the shared attention mask hides keys more than S - L ahead of the query, the
// per-head one a scattered pattern.
Tensor padding01(const MhaCase& c) {
  std::vector<double> v;
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t j = 0; j < c.source; ++j) v.push_back(j >= c.source - 1 - b ? 1.0 : 0.0);
  return from_vector(v, {c.batch, c.source});
}

Tensor attention01(const MhaCase& c) {
  const int64_t planes = c.attn_per_head ? c.batch * c.heads : 1;
  std::vector<double> v;
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t i = 0; i < c.target; ++i)
      for (int64_t j = 0; j < c.source; ++j) {
        const bool hidden = c.attn_per_head ? j > 0 && (i + j + p) % 3 == 0 : j > i + c.source - c.target;
        v.push_back(hidden ? 1.0 : 0.0);
      }
  return c.attn_per_head ? from_vector(v, {planes, c.target, c.source}) : from_vector(v, {c.target, c.source});
}

// Inputs under "mha.<name>.", as the script reads them.
void add_case_inputs(const MhaCase& c, uint64_t seed, StateDict* in) {
  const std::string p = "mha." + c.name + ".";
  (*in)[p + "query"] = rand64(c.layout(c.target, c.embed), seed);
  if (!c.self) {
    (*in)[p + "key"] = rand64(c.layout(c.source, c.kdim), seed + 1);
    (*in)[p + "value"] = rand64(c.layout(c.source, c.vdim), seed + 2);
  }
  const Shape attn_shape = c.attn_per_head ? Shape{c.batch * c.heads, c.target, c.source} : Shape{c.target, c.source};
  if (c.kpm == MaskKind::Bool) (*in)[p + "kpm"] = padding01(c);
  if (c.kpm == MaskKind::Float) (*in)[p + "kpm"] = rand64({c.batch, c.source}, seed + 3);
  if (c.attn == MaskKind::Bool) (*in)[p + "attn_mask"] = attention01(c);
  if (c.attn == MaskKind::Float) (*in)[p + "attn_mask"] = rand64(attn_shape, seed + 4);
  const int64_t length = c.self ? c.target : c.source;
  (*in)[p + "w_out"] = rand64(c.layout(c.target, c.embed), seed + 5);
  const Shape weights = c.average ? Shape{c.batch, c.target, length} : Shape{c.batch, c.heads, c.target, length};
  if (c.need_weights) (*in)[p + "w_weights"] = rand64(weights, seed + 6);
}

// strata's module, its parameters into `in` (for torch), and its results under the script's names.
void run_case(const MhaCase& c, uint64_t seed, StateDict* in, StateDict* ours) {
  Generator gen(seed);
  nn::MultiheadAttention mha(c.embed, c.heads,
                             {.bias = c.bias,
                              .batch_first = c.batch_first,
                              .kdim = c.kdim,
                              .vdim = c.vdim,
                              .init = {.dtype = DType::Float64, .gen = &gen}});
  const std::string p = "mha." + c.name + ".";
  for (auto& [name, t] : mha.state_dict()) (*in)[p + "param." + name] = t;
  add_case_inputs(c, seed, in);
  auto input = [&](const std::string& name) { return in->at(p + name).clone().set_requires_grad(true); };
  auto mask = [&](const std::string& name, MaskKind kind) {
    if (kind == MaskKind::None) return Tensor();
    const Tensor& m = in->at(p + name);
    return kind == MaskKind::Bool ? ne(m, 0.0) : m;
  };
  const Tensor query = input("query");
  const Tensor key = c.self ? query : input("key"), value = c.self ? query : input("value");
  nn::AttentionOutput r =
      mha.forward(query, key, value, mask("kpm", c.kpm), mask("attn_mask", c.attn), c.need_weights, c.average);
  Tensor loss = sum(mul(r.output, in->at(p + "w_out")));
  if (c.need_weights) {
    loss = add(loss, sum(mul(r.weights, in->at(p + "w_weights"))));
    (*ours)[p + "weights"] = r.weights;
  }
  loss.backward();
  (*ours)[p + "out"] = r.output;
  (*ours)[p + "grad.query"] = query.grad();
  if (!c.self) {
    (*ours)[p + "grad.key"] = key.grad();
    (*ours)[p + "grad.value"] = value.grad();
  }
  for (const auto& [name, t] : mha.named_parameters()) (*ours)[p + "grad." + name] = t.grad();
}

std::vector<MhaCase> mha_cases() {
  using M = MaskKind;
  return {
      {.name = "self_fused", .target = 5, .source = 5, .self = true},
      {.name = "cross_kpm_avg_weights", .need_weights = true, .kpm = M::Bool},
      {.name = "bool_attn_kpm_head_weights", .need_weights = true, .average = false, .kpm = M::Bool, .attn = M::Bool},
      {.name = "float_attn_per_head_fused", .kpm = M::Bool, .attn = M::Float, .attn_per_head = true},
      {.name = "bool_attn_per_head_weights", .need_weights = true, .attn = M::Bool, .attn_per_head = true},
      {.name = "float_attn_weights", .need_weights = true, .attn = M::Float},
      {.name = "float_kpm_weights", .need_weights = true, .kpm = M::Float},
      {.name = "kdim_vdim", .kdim = 5, .vdim = 3, .need_weights = true, .kpm = M::Bool},
      {.name = "kdim_vdim_no_bias_fused", .kdim = 5, .vdim = 3, .bias = false, .attn = M::Bool},
      {.name = "sequence_first", .heads = 4, .batch_first = false, .kpm = M::Bool, .attn = M::Bool},
  };
}

// LayerNorm(bias = false) and LayerNorm(elementwise_affine = false), under "ln.".
void run_layer_norms(StateDict* in, StateDict* ours) {
  const int64_t dim = 7;
  (*in)["ln.x"] = rand64({3, 4, dim}, 41);
  (*in)["ln.w"] = rand64({dim}, 42);
  (*in)["ln.w_out"] = rand64({3, 4, dim}, 43);
  for (const bool affine : {true, false}) {
    nn::LayerNorm ln(dim, {.eps = 1e-5, .elementwise_affine = affine, .bias = false, .dtype = DType::Float64});
    ASSERT_EQ(ln.named_parameters().size(), affine ? 1U : 0U);
    ASSERT_FALSE(ln.bias.defined());
    if (affine) {
      NoGradGuard no_grad;
      ln.weight.copy_(in->at("ln.w"));
    }
    Tensor x = in->at("ln.x").clone().set_requires_grad(true);
    Tensor y = ln.forward(x);
    sum(mul(y, in->at("ln.w_out"))).backward();
    const std::string p = affine ? "ln.weight_only." : "ln.no_affine.";
    (*ours)[p + "out"] = y;
    (*ours)[p + "grad.x"] = x.grad();
    if (affine) (*ours)[p + "grad.weight"] = ln.weight.grad();
  }
}

// Embedding with padding_idx 2 and -1 (the last row), indices hitting the padding row twice.
void run_embeddings(StateDict* in, StateDict* ours, Metadata* meta) {
  const int64_t vocab = 6, dim = 4;
  (*in)["emb.weight"] = rand64({vocab, dim}, 51);
  (*in)["emb.indices"] = from_vector(std::vector<int64_t>{2, 0, 5, 2, 3, 5, 1, 2}, {2, 4});
  (*in)["emb.w_out"] = rand64({2, 4, dim}, 52);
  for (const auto& [name, padding] : {std::pair{"p2", int64_t{2}}, std::pair{"neg1", int64_t{-1}}}) {
    (*meta)[std::string("emb_padding.") + name] = std::to_string(padding);
    nn::Embedding emb(vocab, dim, {.dtype = DType::Float64}, padding);
    {
      NoGradGuard no_grad;
      emb.weight.copy_(in->at("emb.weight"));
    }
    Tensor y = emb.forward(in->at("emb.indices"));
    sum(mul(y, in->at("emb.w_out"))).backward();
    (*ours)[std::string("emb.") + name + ".out"] = y;
    (*ours)[std::string("emb.") + name + ".grad.weight"] = emb.weight.grad();
  }
}

}  // namespace

TEST(Reference, NnModulesMatchPyTorch) {
  if (!strata::testing::python_has_module("torch"))
    GTEST_SKIP() << "/usr/bin/python3 has no torch (apt install python3-torch)";
  strata::testing::TempDir dir;
  StateDict in, ours;
  Metadata meta{{"ln_eps", "1e-5"}};
  uint64_t seed = 100;
  for (const MhaCase& c : mha_cases()) {
    meta["mha." + c.name] = c.describe();
    run_case(c, seed, &in, &ours);
    seed += 10;
  }
  run_layer_norms(&in, &ours);
  run_embeddings(&in, &ours, &meta);
  save_safetensors(dir.file("input.safetensors"), in, meta);
  std::string output;
  const int rc = strata::testing::run_python_script(
      "reference/nn_modules_reference.py", {dir.file("input.safetensors"), dir.file("output.safetensors")}, &output);
  ASSERT_EQ(rc, 0) << output;
  const StateDict ref = load_safetensors(dir.file("output.safetensors")).tensors;

  // The longest sum: a weight gradient over B * max(L, S) rows or a product over max(E, kdim, vdim, S).
  const double bound = float64_bound(2 * 6);
  EXPECT_EQ(ours.size(), ref.size());
  for (const auto& [name, want] : ref) {
    ASSERT_TRUE(ours.count(name)) << name << " computed by the script only";
    const Tensor& got = ours.at(name);
    ASSERT_TRUE(got.defined()) << name;
    ASSERT_EQ(got.shape(), want.shape()) << name;
    EXPECT_LT(rel_err(got, want), bound) << name;
  }
  // The padding row's gradient is zero although the padding index is looked up three times.
  for (const auto& [name, row] : {std::pair{"p2", int64_t{2}}, std::pair{"neg1", int64_t{5}}}) {
    const std::vector<double> g =
        ours.at(std::string("emb.") + name + ".grad.weight").select(0, row).to_vector<double>();
    EXPECT_TRUE(std::all_of(g.begin(), g.end(), [](double v) { return v == 0.0; })) << name;
  }
}
