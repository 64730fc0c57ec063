// Model families by name (train/model_registry.h) and parameters drawn by name (nn::fill_init).
#include <gtest/gtest.h>

#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using strata::testing::error_of;
using strata::testing::expect_contains;

namespace {

nn::GPTConfig small_gpt() {
  return {.vocab_size = 11, .context = 8, .n_layer = 2, .n_head = 2, .n_embd = 8, .seed = 5};
}
nn::LlamaConfig small_llama() {
  return {.vocab_size = 13,
          .context = 8,
          .n_layer = 2,
          .n_head = 4,
          .n_kv_head = 2,
          .n_embd = 16,
          .intermediate_size = 24,
          .seed = 5};
}

void expect_same_state(const StateDict& a, const StateDict& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) EXPECT_EQ(max_abs_diff(t, b.at(name)), 0.0) << name;
}

}  // namespace

TEST(ModelRegistry, ConfigsRecordTheirFamilyAndComeBack) {
  const checkpoint::Metadata g = train::config_metadata(small_gpt());
  const checkpoint::Metadata l = train::config_metadata(small_llama());
  EXPECT_EQ(g.at("config.family"), "gpt2");
  EXPECT_EQ(l.at("config.family"), "llama");
  EXPECT_EQ(&train::family_of(g, "here"), &train::model_family("gpt2"));
  EXPECT_EQ(&train::family_of(l, "here"), &train::model_family("llama"));
  EXPECT_EQ(train::config_metadata(train::gpt_config_from_metadata(g, "here")), g);
  EXPECT_EQ(train::config_metadata(train::llama_config_from_metadata(l, "here")), l);
  // One family's entries are not read as another's.
  expect_contains(error_of([&] { train::llama_config_from_metadata(g, "checkpoint 'c'"); }),
                  "checkpoint 'c': 'config.family' is 'gpt2', not llama");
}

TEST(ModelRegistry, AMissingOrUnknownFamilyIsNamed) {
  checkpoint::Metadata old = train::config_metadata(small_llama());
  old.erase("config.family");  // a checkpoint saved before families were recorded
  const std::string e = error_of([&] { train::family_of(old, "checkpoint 'old'"); });
  expect_contains(e, "checkpoint 'old'");
  expect_contains(e, "'config.family'");
  expect_contains(e, "--format gpt2, llama, mixtral");
  expect_contains(error_of([] { train::model_family("mamba"); }),
                  "unknown model family 'mamba': known families are gpt2, llama, mixtral");
  train::ModelFamily incomplete;
  incomplete.name = "half";
  expect_contains(error_of([&] { train::register_model_family(incomplete); }), "family 'half' needs");
  expect_contains(error_of([] { train::register_model_family(train::model_family("gpt2")); }), "'gpt2' is already");
}

TEST(ModelRegistry, BuildsTheModelItsConfigDescribes) {
  nn::GPTConfig gc = small_gpt();
  gc.seed = 1337;  // the config entries leave the seed out: the default one builds
  auto g = train::model_family("gpt2").build(train::config_metadata(gc), nullptr, {}, "here");
  ASSERT_NE(dynamic_cast<nn::GPT*>(g.get()), nullptr);
  expect_same_state(g->state_dict(), nn::GPT(gc).state_dict());
  nn::LlamaConfig lc = small_llama();
  lc.seed = 1337;
  auto l = train::model_family("llama").build(train::config_metadata(lc), nullptr, {}, "here");
  expect_same_state(l->state_dict(), nn::Llama(lc).state_dict());
  // ZeRO-3's unit predicate picks the blocks.
  int units = 0;
  for (auto& [name, m] : l->named_modules()) units += train::model_family("llama").zero3_unit(name, *m) ? 1 : 0;
  EXPECT_EQ(units, lc.n_layer);
  expect_contains(
      error_of([&] { train::model_family("llama").check_tensor_parallel(train::config_metadata(lc), 3, "run"); }),
      "tensor-parallel degree 3");
  expect_contains(
      error_of([&] { train::model_family("gpt2").check_tensor_parallel(train::config_metadata(gc), 4, "run"); }),
      "run: the tensor-parallel degree 4 does not divide config.n_head 2");
}

TEST(ParamInit, APartDrawsTheWholeParametersElements) {
  const PhiloxStream stream = named_stream(7, "h.0.attn.c_attn.weight");
  const nn::ParamInit normal{.kind = nn::ParamInit::Kind::Normal, .scale = 0.02};
  Tensor whole = zeros({12, 3});
  nn::fill_init(whole, normal, stream);
  // Rows 2-3 of each of 3 sections (rank 1 of 2 in a fused q, k, v), and a padded tail.
  Tensor part = zeros({6, 3});
  const nn::PartOfWhole sections{.whole = {12, 3}, .dim = 0, .runs = {{0, 2, 2}, {2, 6, 2}, {4, 10, 2}}};
  nn::fill_init(part, normal, stream, &sections);
  EXPECT_EQ(max_abs_diff(part, cat({whole.narrow(0, 2, 2), whole.narrow(0, 6, 2), whole.narrow(0, 10, 2)}, 0)), 0.0);
  Tensor padded = ones({5, 3});
  const nn::PartOfWhole tail{.whole = {12, 3}, .dim = 0, .runs = {{0, 10, 2}}};
  nn::fill_init(padded, normal, stream, &tail);
  EXPECT_EQ(max_abs_diff(padded.narrow(0, 0, 2), whole.narrow(0, 10, 2)), 0.0);
  EXPECT_EQ(max_abs_diff(padded.narrow(0, 2, 3), zeros({3, 3})), 0.0);
  // Columns (a row-parallel weight's part).
  Tensor cols = zeros({12, 1});
  const nn::PartOfWhole col{.whole = {12, 3}, .dim = 1, .runs = {{0, 2, 1}}};
  nn::fill_init(cols, normal, stream, &col);
  EXPECT_EQ(max_abs_diff(cols, whole.narrow(1, 2, 1)), 0.0);
  // Another name is another stream.
  Tensor other = zeros({12, 3});
  nn::fill_init(other, normal, named_stream(7, "h.0.attn.c_proj.weight"));
  EXPECT_GT(max_abs_diff(other, whole), 0.0);
}
