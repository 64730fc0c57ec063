// nn::Mixtral: Hugging Face names, the MoE auxiliary losses in the model's loss (also through
// activation recompute), training on the synthetic task, the registry's config entries and
// builder, and the parallel layouts it refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <fstream>
#include <iterator>
#include <string>

#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using namespace strata::nn;
using strata::testing::expect_error_mentions;

namespace {

MixtralConfig tiny_mixtral(DType dtype = DType::Float64) {
  return {.llama = {.vocab_size = 14,
                    .context = 16,
                    .n_layer = 2,
                    .n_head = 4,
                    .n_kv_head = 2,
                    .n_embd = 16,
                    .intermediate_size = 12,
                    .dtype = dtype},
          .num_experts = 4,
          .top_k = 2,
          .aux_loss_coef = 0.02,
          .z_loss_coef = 0.001};
}

double max_abs_of(const Tensor& t) {
  double m = 0;
  for (double v : t.to_vector<double>()) m = std::max(m, std::fabs(v));
  return m;
}

Tensor tokens_of(int64_t B, int64_t T, uint64_t seed) {
  Generator g(seed);
  return randint(0, 14, {B, T}, {.dtype = DType::Int64}, &g);
}

}  // namespace

TEST(Mixtral, ParametersCarryHuggingFaceNames) {
  Mixtral model(tiny_mixtral(DType::Float32));
  std::map<std::string, Shape> shapes;
  for (const auto& [name, p] : model.named_parameters()) shapes[name] = p.shape();
  EXPECT_EQ(shapes.at("layers.1.block_sparse_moe.gate.weight"), Shape({4, 16}));
  EXPECT_EQ(shapes.at("layers.0.block_sparse_moe.experts.3.w1.weight"), Shape({12, 16}));
  EXPECT_EQ(shapes.at("layers.0.block_sparse_moe.experts.3.w2.weight"), Shape({16, 12}));
  EXPECT_EQ(shapes.at("layers.0.block_sparse_moe.experts.3.w3.weight"), Shape({12, 16}));
  EXPECT_EQ(shapes.count("layers.0.mlp.up_proj.weight"), 0u);
  const ParameterCounts c = parameter_counts(tiny_mixtral());
  EXPECT_EQ(model.num_parameters(), c.embedding + 2 * c.block + c.head);
}

TEST(Mixtral, LossAddsEveryBlocksAuxiliaryLoss) {
  Mixtral model(tiny_mixtral());
  Tensor tokens = tokens_of(2, 8, 1), targets = tokens_of(2, 8, 2);
  Tensor loss = model.loss(tokens, targets);
  Tensor logits = model.forward(tokens);
  const double ce = cross_entropy(logits.reshape({16, 14}), targets.reshape({16})).item();
  double aux = 0;
  for (const MoEStats& s : model.moe_stats()) aux += 0.02 * s.load_balancing_loss.item() + 0.001 * s.z_loss.item();
  EXPECT_GT(aux, 0.0);
  EXPECT_NEAR(loss.item(), ce + aux, 64 * DBL_EPSILON * (ce + aux));
  EXPECT_EQ(model.moe_stats().size(), 2u);
  EXPECT_EQ(model.moe_stats()[0].tokens_per_expert.size(), 4u);
}

// Recompute carries the blocks' auxiliary losses as a second checkpoint output: the router
// gradients they add must arrive, bit for bit as without recompute.
TEST(Mixtral, RecomputeKeepsTheAuxiliaryLossGradients) {
  Tensor tokens = tokens_of(2, 8, 3), targets = tokens_of(2, 8, 4);
  Mixtral plain(tiny_mixtral()), recomputed(tiny_mixtral());
  recomputed.set_recompute(true);
  const double a = plain.loss(tokens, targets).item();
  plain.loss(tokens, targets).backward();
  const double b = recomputed.loss(tokens, targets).item();
  recomputed.loss(tokens, targets).backward();
  EXPECT_EQ(a, b);
  std::map<std::string, Tensor> theirs;
  for (const auto& [name, p] : recomputed.named_parameters()) theirs[name] = p;
  for (const auto& [name, p] : plain.named_parameters()) {
    ASSERT_EQ(p.grad().defined(), theirs.at(name).grad().defined()) << name;
    if (!p.grad().defined()) continue;  // an idle expert
    EXPECT_EQ(sub(p.grad(), theirs.at(name).grad()).to_vector<double>(),
              std::vector<double>(static_cast<size_t>(p.numel()), 0.0))
        << name;
  }
}

// Backward from the logits alone: the recomputed blocks' auxiliary-loss output gets no
// gradient (the engine passes zeros), and the gradients equal those without recompute.
TEST(Mixtral, RecomputeWithTheAuxiliaryLossUnused) {
  Tensor tokens = tokens_of(2, 8, 5);
  Mixtral plain(tiny_mixtral()), recomputed(tiny_mixtral());
  recomputed.set_recompute(true);
  sum(plain.forward(tokens)).backward();
  sum(recomputed.forward(tokens)).backward();
  std::map<std::string, Tensor> theirs;
  for (const auto& [name, p] : recomputed.named_parameters()) theirs[name] = p;
  for (const auto& [name, p] : plain.named_parameters()) {
    ASSERT_EQ(p.grad().defined(), theirs.at(name).grad().defined()) << name;
    if (!p.grad().defined()) continue;  // an idle expert
    EXPECT_EQ(sub(p.grad(), theirs.at(name).grad()).to_vector<double>(),
              std::vector<double>(static_cast<size_t>(p.numel()), 0.0))
        << name;
  }
  EXPECT_GT(max_abs_of(plain.layer(0).block_sparse_moe->gate->weight.grad()), 0.0);
}

TEST(Mixtral, TrainsOnTheSyntheticTask) {
  data::SyntheticTask task({.digits = 2});
  MixtralConfig c = tiny_mixtral(DType::Float32);
  c.llama.context = task.sequence_length();
  Mixtral model(c);
  optim::AdamW opt(model.parameters(), {.lr = 3e-3});
  std::vector<int64_t> rows(16);
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int64_t>(step * 16 + static_cast<int>(i));
    data::Batch b = task.make_batch(rows);
    Tensor loss = model.loss(b.inputs, b.targets);
    (step == 0 ? first : last) = loss.item();
    loss.backward();
    opt.step();
    opt.zero_grad();
  }
  // From about ln(14) = 2.6 (uniform over the vocabulary) to the digits' entropy and below.
  EXPECT_LT(last, 0.8 * first) << "first " << first << ", last " << last;
}

TEST(Mixtral, RegistryRoundTripsTheConfigAndBuilds) {
  MixtralConfig c = tiny_mixtral();
  c.capacity_factor = 1.5;
  c.gating = MoEGating::Sigmoid;
  const checkpoint::Metadata m = train::config_metadata(c);
  EXPECT_EQ(m.at("config.family"), "mixtral");
  EXPECT_EQ(m.at("config.capacity_factor"), "1.5");
  const MixtralConfig back = train::mixtral_config_from_metadata(m, "test");
  EXPECT_EQ(back.num_experts, 4);
  EXPECT_EQ(back.top_k, 2);
  EXPECT_EQ(back.gating, MoEGating::Sigmoid);
  EXPECT_EQ(back.capacity_factor, std::optional<double>(1.5));
  EXPECT_EQ(back.aux_loss_coef, 0.02);
  EXPECT_EQ(back.llama.n_embd, 16);
  EXPECT_FALSE(train::mixtral_config_from_metadata(train::config_metadata(tiny_mixtral()), "t").capacity_factor);
  const train::ModelFamily& family = train::family_of(m, "test");
  EXPECT_EQ(family.name, "mixtral");
  auto model = family.build(m, nullptr, {}, "test");
  EXPECT_NE(dynamic_cast<Mixtral*>(model.get()), nullptr);
  // Experts split under tensor parallelism; its degree divides each expert's width.
  EXPECT_NO_THROW(family.check_tensor_parallel(m, 2, "test"));
  MixtralConfig odd = tiny_mixtral();
  odd.llama.intermediate_size = 13;
  expect_error_mentions([&] { check_mixtral_config(odd, 2); }, {"tensor-parallel degree 2", "intermediate_size 13"});
  checkpoint::Metadata bad = m;
  bad["config.top_k"] = "5";
  expect_error_mentions([&] { family.check_config(bad, "ckpt"); }, {"top_k 5", "[1, 4]"});
}

TEST(Mixtral, HuggingFaceExportImportRoundTrips) {
  const std::string dir = ::testing::TempDir() + "strata_mixtral_hf";
  Mixtral model(tiny_mixtral(DType::Float32));
  const train::ModelFamily& family = train::model_family("mixtral");
  family.export_hf(dir, model.state_dict(), train::config_metadata(model.mixtral_config()), "test");
  checkpoint::Metadata config;
  StateDict back = family.import_hf(dir, &config, 0);
  const MixtralConfig read = train::mixtral_config_from_metadata(config, "test");
  EXPECT_EQ(read.num_experts, 4);
  EXPECT_EQ(read.top_k, 2);
  EXPECT_DOUBLE_EQ(read.aux_loss_coef, 0.02);
  // In transformers' normalisation: 0.02 x 2 layers / top_k 2.
  std::ifstream json(dir + "/config.json");
  EXPECT_NE(std::string(std::istreambuf_iterator<char>(json), {}).find("\"router_aux_loss_coef\": 0.02"),
            std::string::npos);
  Mixtral loaded(read);
  loaded.load_state_dict(back);
  Tensor tokens = tokens_of(1, 6, 5);
  NoGradGuard no_grad;
  EXPECT_EQ(sub(model.forward(tokens), loaded.forward(tokens)).to_vector<float>(), std::vector<float>(6 * 14, 0.0f));
}
